/**
 * What counts as a leaked secret in text a test captured (a redacted URL, a CLI's stdout and
 * stderr), so the redaction property test and the CLI test judge output by the same definition.
 *
 * A leak is a run of at least LEAK_RUN consecutive characters (code points) of a secret, in any
 * of its spellings (as typed, percent-decoded, percent-encoded), that occurs in the output but
 * not in `visible`: the text anybody may see, i.e. the URL with every secret replaced by `***`
 * (host, port, database, user, other parameters) and the fixed words of messages. Shorter runs
 * are not judged: 1 to 3 characters of any password occur by chance in host names, ports and
 * words ("127", "db", "loc"); a whole short password is checked by the exact-output property
 * instead.
 */

export const LEAK_RUN = 4;

/** The spellings a secret value may take in a URL or a message. */
export function spellingsOf(value: string): string[] {
  const userInfo = new URL('x://h');
  userInfo.password = value;
  let decoded = value;
  try {
    decoded = decodeURIComponent(value);
  } catch {
    // not percent-encoded text: the value is its only decoded form
  }
  return [...new Set([value, decoded, encodeURIComponent(value), userInfo.password])];
}

/** Every run of `secrets` (>= LEAK_RUN code points) found in `output` but not in `visible`. */
export function leakedRuns(output: string, secrets: readonly string[], visible: string): string[] {
  const found = new Set<string>();
  for (const secret of secrets) {
    const chars = Array.from(secret);
    for (let i = 0; i + LEAK_RUN <= chars.length; i++) {
      for (let j = i + LEAK_RUN; j <= chars.length; j++) {
        const run = chars.slice(i, j).join('');
        // A longer run from i cannot be in the output when this one is not.
        if (!output.includes(run)) break;
        if (!visible.includes(run)) found.add(run);
      }
    }
  }
  return [...found];
}
