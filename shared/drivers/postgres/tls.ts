/**
 * TLS for the driver's query connections, negotiated on the socket before postgres.js gets it,
 * so the socket postgres.js reads carries plaintext the COPY tap can frame (copy-tap.ts). What is
 * negotiated is exactly what postgres.js 3.4 negotiates for the same URL (its `secure()`):
 *
 *   sslmode / ssl in the URL (or PGSSL)  what happens
 *   absent, disable, false               plain TCP
 *   prefer                               SSLRequest; TLS without certificate checks if the
 *                                        server says 'S', plain if it says 'N'
 *   require, allow                       SSLRequest; TLS without certificate checks ('N' fails)
 *   verify-ca, verify-full, true         SSLRequest; TLS verifying the chain against Node's CAs
 *                                        (NODE_EXTRA_CA_CERTS adds e.g. the RDS bundle) and the
 *                                        host name
 *   sslrootcert=system                   verify-full
 *   sslnegotiation=direct                TLS at once (PostgreSQL 17), ALPN "postgresql"
 *
 * Owns: the SSLRequest exchange and the TLS upgrade of one socket. Never logs; failures reject
 * with Node's TLS errors, which translateConnectError (connect.ts) turns into SOURCE_TLS.
 */
import { isIP, type Socket } from 'node:net';
import { type ConnectionOptions, connect as tlsConnect } from 'node:tls';

/** postgres.js' `ssl` setting for a URL: false (plain), a mode name, or true. */
export type TlsMode = false | true | string;

export interface TlsSettings {
  readonly mode: TlsMode;
  /** `sslnegotiation=direct`: TLS from the first byte, no SSLRequest. */
  readonly direct: boolean;
}

/** The TLS settings postgres.js derives from `url` (and PGSSL), see the table above. */
export function tlsOf(url: string): TlsSettings {
  let params: URLSearchParams;
  try {
    params = new URL(url).searchParams;
  } catch {
    return { mode: false, direct: false };
  }
  let raw: string | undefined = params.get('sslmode') ?? params.get('ssl') ?? undefined;
  if (params.get('sslrootcert') === 'system') raw = 'verify-full';
  raw ??= process.env.PGSSL || undefined;
  const mode: TlsMode =
    raw === undefined || raw === 'disable' || raw === 'false' ? false : raw === 'true' ? true : raw;
  return { mode, direct: params.get('sslnegotiation') === 'direct' };
}

/** SSLRequest: int32 length 8, int32 code 80877103. */
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
const SSL_YES = 0x53; // 'S'

/**
 * Upgrades the connected `socket` to `host` as `tls` says; resolves the socket postgres.js is
 * to read (the TLS one, or `socket` itself when TLS is off or `prefer` was refused).
 */
export async function negotiateTls(socket: Socket, host: string, tls: TlsSettings): Promise<Socket> {
  if (tls.mode === false) return socket;
  if (!tls.direct) {
    const accepted = await new Promise<boolean>((resolve, reject) => {
      const onError = (e: Error) => reject(e);
      const onClose = () =>
        reject(
          Object.assign(new Error('the server closed the connection on the SSL request'), {
            code: 'ECONNRESET',
          }),
        );
      socket.once('error', onError);
      socket.once('close', onClose);
      socket.once('data', (x: Buffer) => {
        socket.removeListener('error', onError);
        socket.removeListener('close', onClose);
        // Nothing else may follow the one-byte answer before the handshake (CVE-2021-23222).
        if (x.length !== 1) {
          reject(
            Object.assign(new Error('unexpected data after the SSL request answer'), {
              code: 'SSL_PROTOCOL',
            }),
          );
          return;
        }
        resolve(x[0] === SSL_YES);
      });
      socket.write(SSL_REQUEST);
    });
    // postgres.js continues into the handshake on 'N' unless the mode is prefer (which then
    // goes plain); the handshake against a server that refused fails with a TLS error.
    if (!accepted && tls.mode === 'prefer') return socket;
    if (!accepted) {
      socket.destroy();
      throw Object.assign(
        new Error('the server does not accept SSL connections (it answered N to the SSL request)'),
        {
          code: 'SSL_REFUSED',
        },
      );
    }
  }
  const options: ConnectionOptions = { socket, servername: isIP(host) ? undefined : host };
  if (tls.direct) options.ALPNProtocols = ['postgresql'];
  if (tls.mode === 'require' || tls.mode === 'allow' || tls.mode === 'prefer')
    options.rejectUnauthorized = false;
  return new Promise<Socket>((resolve, reject) => {
    const secure = tlsConnect(options);
    secure.once('secureConnect', () => {
      secure.removeListener('error', reject);
      resolve(secure);
    });
    secure.once('error', reject);
  });
}
