/**
 * A failed TLS handshake, named for the metric and the log: the error text OpenSSL and node:tls
 * give is long and varies between versions, the reason label must stay a short closed set.
 * Pure; pinned by test/unit/sip/tls-handshake-failure.test.ts.
 */

export type HandshakeFailure =
  'timeout' | 'not-tls' | 'certificate' | 'negotiation' | 'reset' | 'other';

export function handshakeFailure(error: unknown): HandshakeFailure {
  const code = (error as { code?: unknown } | null)?.code;
  const text = `${typeof code === 'string' ? code : ''} ${error instanceof Error ? error.message : String(error)}`;
  if (/HANDSHAKE_TIMEOUT/i.test(text)) return 'timeout';
  if (/ECONNRESET|EPIPE|socket disconnected|socket hang up/i.test(text)) return 'reset';
  if (
    /wrong version number|http request|unknown protocol|(?:packet|data) length too long|record layer|unexpected message/i.test(
      text,
    )
  )
    return 'not-tls';
  if (
    /certificate|CERT_|unknown.ca|self.signed|unable to (?:get|verify)|altnames|fingerprint|Hostname|IP: /i.test(
      text,
    )
  )
    return 'certificate';
  if (
    /no shared cipher|version|unsupported protocol|no protocols|handshake failure|alert/i.test(text)
  )
    return 'negotiation';
  return 'other';
}
