/**
 * The reason label of a failed TLS handshake, from the errors node:tls and OpenSSL give. The
 * texts are those Node 20 (OpenSSL 3.0) and Node 24 (OpenSSL 3.5) report to a tls.Server's
 * tlsClientError and to a client socket's error, recorded from real handshakes, plus the older
 * OpenSSL spellings.
 */
import { describe, expect, it } from 'vitest';
import {
  handshakeFailure,
  type HandshakeFailure,
} from '../../../gateway/sip/tls-handshake-failure.ts';

const openssl = (code: string, routine: string, reason: string): Error =>
  Object.assign(
    new Error(
      `80FC6F8CA07F0000:error:0A00010B:SSL routines:${routine}:${reason}:../deps/openssl/openssl/ssl/record/ssl3_record.c:350:\n`,
    ),
    { code },
  );
const nodeError = (code: string, message: string): Error =>
  Object.assign(new Error(message), { code });

const CASES: readonly [HandshakeFailure, string, unknown][] = [
  [
    'timeout',
    'the listener handshake timeout',
    nodeError('ERR_TLS_HANDSHAKE_TIMEOUT', 'TLS handshake timeout'),
  ],
  [
    'timeout',
    'the dialing side timeout',
    nodeError('ERR_TLS_HANDSHAKE_TIMEOUT', 'tls handshake timed out'),
  ],
  ['reset', 'a peer gone mid-handshake', nodeError('ECONNRESET', 'socket hang up')],
  [
    'reset',
    'a client whose server went away',
    nodeError(
      'ECONNRESET',
      'Client network socket disconnected before secure TLS connection was established',
    ),
  ],
  ['reset', 'a write to a closed socket', nodeError('EPIPE', 'write EPIPE')],
  [
    'not-tls',
    'plain SIP text',
    openssl('ERR_SSL_WRONG_VERSION_NUMBER', 'ssl3_get_record', 'wrong version number'),
  ],
  [
    'not-tls',
    'an HTTP request',
    openssl('ERR_SSL_HTTP_REQUEST', 'ssl3_get_record', 'http request'),
  ],
  [
    'not-tls',
    'a record header with an impossible length',
    openssl('ERR_SSL_PACKET_LENGTH_TOO_LONG', 'ssl3_get_record', 'packet length too long'),
  ],
  [
    'not-tls',
    'a record header with an impossible length (OpenSSL 3.5)',
    openssl('ERR_SSL_DATA_LENGTH_TOO_LONG', 'tls_validate_record_header', 'data length too long'),
  ],
  [
    'not-tls',
    'plain SIP text (OpenSSL 3.5)',
    openssl('ERR_SSL_WRONG_VERSION_NUMBER', 'tls_validate_record_header', 'wrong version number'),
  ],
  [
    'not-tls',
    'OpenSSL 1.1 spelling',
    new Error('error:140770FC:SSL routines:SSL23_GET_SERVER_HELLO:unknown protocol'),
  ],
  [
    'not-tls',
    'OpenSSL 3.2 record layer',
    openssl('ERR_SSL_RECORD_LAYER_FAILURE', 'ssl3_read_bytes', 'record layer failure'),
  ],
  [
    'not-tls',
    'an unexpected message',
    openssl('ERR_SSL_UNEXPECTED_MESSAGE', 'ssl3_read_bytes', 'unexpected message'),
  ],
  [
    'certificate',
    'an unknown issuer',
    nodeError('UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'unable to verify the first certificate'),
  ],
  [
    'certificate',
    'no local issuer',
    nodeError('UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'unable to get local issuer certificate'),
  ],
  [
    'certificate',
    'a self-signed leaf',
    nodeError('DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate'),
  ],
  [
    'certificate',
    'a self-signed chain',
    nodeError('SELF_SIGNED_CERT_IN_CHAIN', 'self signed certificate in certificate chain'),
  ],
  [
    'certificate',
    'an expired certificate',
    nodeError('CERT_HAS_EXPIRED', 'certificate has expired'),
  ],
  [
    'certificate',
    'a name mismatch',
    nodeError(
      'ERR_TLS_CERT_ALTNAME_INVALID',
      "Hostname/IP does not match certificate's altnames: IP: 127.0.0.2 is not in the cert's list: 127.0.0.1",
    ),
  ],
  [
    'certificate',
    "a trunk's fingerprint mismatch",
    new Error("certificate AB:CD is not the trunk's (expected trunk.example)"),
  ],
  [
    'certificate',
    "a peer refusing callgate's CA",
    openssl('ERR_SSL_TLSV1_ALERT_UNKNOWN_CA', 'ssl3_read_bytes', 'tlsv1 alert unknown ca'),
  ],
  [
    'certificate',
    "a peer refusing callgate's certificate",
    openssl(
      'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE',
      'ssl3_read_bytes',
      'sslv3 alert bad certificate',
    ),
  ],
  [
    'certificate',
    'a peer demanding a client certificate',
    openssl(
      'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
      'ssl3_read_bytes',
      'tlsv13 alert certificate required',
    ),
  ],
  [
    'certificate',
    "a peer refusing callgate's certificate (OpenSSL 3.5)",
    openssl(
      'ERR_SSL_SSL/TLS_ALERT_BAD_CERTIFICATE',
      'ssl3_read_bytes',
      'ssl/tls alert bad certificate',
    ),
  ],
  [
    'certificate',
    'an unknown issuer (Node 24)',
    nodeError(
      'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      'unable to verify the first certificate; if the root CA is installed locally, try running Node.js with --use-system-ca',
    ),
  ],
  [
    'negotiation',
    'a peer refusing the handshake (OpenSSL 3.5)',
    openssl(
      'ERR_SSL_SSL/TLS_ALERT_HANDSHAKE_FAILURE',
      'ssl3_read_bytes',
      'ssl/tls alert handshake failure',
    ),
  ],
  [
    'negotiation',
    'no common cipher',
    openssl('ERR_SSL_NO_SHARED_CIPHER', 'tls_post_process_client_hello', 'no shared cipher'),
  ],
  [
    'negotiation',
    'an old TLS version offered',
    openssl(
      'ERR_SSL_UNSUPPORTED_PROTOCOL',
      'tls_early_post_process_client_hello',
      'unsupported protocol',
    ),
  ],
  [
    'negotiation',
    'a peer refusing the version',
    openssl(
      'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION',
      'ssl3_read_bytes',
      'tlsv1 alert protocol version',
    ),
  ],
  [
    'negotiation',
    'a peer refusing the handshake',
    openssl(
      'ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE',
      'ssl3_read_bytes',
      'sslv3 alert handshake failure',
    ),
  ],
  [
    'negotiation',
    'no protocol enabled',
    openssl('ERR_SSL_NO_PROTOCOLS_AVAILABLE', 'ssl_cipher_list', 'no protocols available'),
  ],
  ['other', 'an unrelated error', new Error('boom')],
  ['other', 'a string', 'something broke'],
  ['other', 'undefined', undefined],
  ['other', 'null', null],
  ['other', 'a numeric code', { code: 42 }],
];

describe('when a TLS handshake fails', () => {
  it.each(CASES)('should name it %s for %s', (reason, _what, error) => {
    expect(handshakeFailure(error)).toBe(reason);
  });

  it('should read the code as well as the message', () => {
    expect(handshakeFailure(nodeError('ERR_TLS_HANDSHAKE_TIMEOUT', ''))).toBe('timeout');
    expect(handshakeFailure(nodeError('ECONNRESET', ''))).toBe('reset');
    expect(handshakeFailure(nodeError('CERT_HAS_EXPIRED', ''))).toBe('certificate');
  });
});
