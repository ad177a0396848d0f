/* libsrtp's AES counter mode, HMAC-SHA1 and AES-GCM on OpenSSL (srtp_openssl_crypto.c). */
#ifndef CALLGATE_SRTP_OPENSSL_CRYPTO_H
#define CALLGATE_SRTP_OPENSSL_CRYPTO_H

#define CALLGATE_SRTP_OPENSSL_AES_CM 1
#define CALLGATE_SRTP_OPENSSL_HMAC_SHA1 2
#define CALLGATE_SRTP_OPENSSL_AES_GCM 4
#define CALLGATE_SRTP_OPENSSL_ALL 7

/* After srtp_init: swaps the primitives in; which of them passed their test and took over. */
int callgate_srtp_use_openssl(void);

#endif
