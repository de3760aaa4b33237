// Preloaded into a child node process (`node --import ./test/harness/report-max-rss.mjs ...`) to
// report its own peak RSS: when the process exits (normally or through process.exit), it writes
// process.resourceUsage().maxRSS (KiB: the kernel's high-water mark of the whole process, worker
// threads included) to the file named by TIDEMARK_MAX_RSS_FILE. Plain JS so it loads before tsx.
import { writeFileSync } from 'node:fs';

const file = process.env.TIDEMARK_MAX_RSS_FILE;
if (file) {
  process.on('exit', () => {
    writeFileSync(file, `${process.resourceUsage().maxRSS}\n`);
  });
}
