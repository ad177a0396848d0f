/*
 * libsrtp's AES counter mode and HMAC-SHA1 on OpenSSL's primitives (the OpenSSL Node.js carries
 * and exports to addons): Debian's libsrtp2 does its crypto through NSS, which sets up a new
 * PKCS#11 context for every packet at a cost that grows with the number of live keys (3.6 us a
 * packet with one call's keys, about 30 us with 300 calls' and 200 us with 1,000 calls', measured
 * in bench/RESULTS.md). libsrtp keeps the protocol (key derivation, rollover counter, replay
 * window, packet layout); only the two primitives of the AES_CM_128_HMAC_SHA1 suites are swapped
 * through its public srtp_replace_cipher_type and srtp_replace_auth_type, which first run each
 * type's known-answer test below (RFC 3711 B.2, RFC 2202 test 1) and refuse it if it fails.
 *
 * Counter mode as libsrtp defines it for SRTP (RFC 3711 section 4.1.1): the key is the 16-byte AES
 * key followed by the 14-byte salt; each packet's IV is XORed with the salt (padded with two zero
 * bytes) to give the first counter block, and the keystream runs on from there across calls.
 * HMAC-SHA1 (RFC 2104) keeps the inner and outer hash states of its key, so a packet costs two
 * state copies and three hash updates.
 */
#ifdef CALLGATE_HAVE_LIBSRTP
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA1_Init and friends: the cheapest state copy there is */
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <srtp2/auth.h>
#include <srtp2/cipher.h>
#include <srtp2/srtp.h>
#include <stdlib.h>
#include <string.h>

#include "srtp_openssl_crypto.h"

#define AES_128_KEY_BYTES 16
#define SALT_BYTES 14
#define ICM_KEY_BYTES (AES_128_KEY_BYTES + SALT_BYTES)
#define BLOCK_BYTES 16
#define SHA1_BYTES 20
#define SHA1_BLOCK_BYTES 64

/* ---- AES-128 counter mode ------------------------------------------------------------------ */

typedef struct {
  EVP_CIPHER_CTX *evp;
  uint8_t salt[BLOCK_BYTES]; /* the 14-byte salt, then two zero bytes */
} icm_state;

static srtp_err_status_t icm_alloc(srtp_cipher_pointer_t *cp, int key_len, int tag_len);
static srtp_err_status_t icm_dealloc(srtp_cipher_pointer_t cp);

static srtp_err_status_t icm_init(void *state, const uint8_t *key) {
  icm_state *s = state;
  memset(s->salt, 0, sizeof(s->salt));
  memcpy(s->salt, key + AES_128_KEY_BYTES, SALT_BYTES);
  if (EVP_EncryptInit_ex(s->evp, EVP_aes_128_ctr(), NULL, key, NULL) != 1)
    return srtp_err_status_init_fail;
  return srtp_err_status_ok;
}

static srtp_err_status_t icm_set_iv(void *state, uint8_t *iv, srtp_cipher_direction_t direction) {
  (void)direction; /* counter mode is its own inverse */
  icm_state *s = state;
  uint8_t counter[BLOCK_BYTES];
  for (int i = 0; i < BLOCK_BYTES; i++) counter[i] = s->salt[i] ^ iv[i];
  if (EVP_EncryptInit_ex(s->evp, NULL, NULL, NULL, counter) != 1) return srtp_err_status_fail;
  return srtp_err_status_ok;
}

static srtp_err_status_t icm_apply(void *state, uint8_t *buffer, unsigned int *octets) {
  icm_state *s = state;
  int out = 0;
  if (EVP_EncryptUpdate(s->evp, buffer, &out, buffer, (int)*octets) != 1 ||
      out != (int)*octets)
    return srtp_err_status_cipher_fail;
  return srtp_err_status_ok;
}

/* RFC 3711 appendix B.2: the first two keystream blocks of that key and salt at index 0. */
static const uint8_t icm_test_key[ICM_KEY_BYTES] = {
    0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c,
    0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd};
static uint8_t icm_test_iv[BLOCK_BYTES] = {0};
static const uint8_t icm_test_plaintext[32] = {0};
static const uint8_t icm_test_ciphertext[32] = {
    0xe0, 0x3e, 0xad, 0x09, 0x35, 0xc9, 0x5e, 0x80, 0xe1, 0x66, 0xb1, 0x6d, 0xd9, 0x2b, 0x4e, 0xb4,
    0xd2, 0x35, 0x13, 0x16, 0x2b, 0x02, 0xd0, 0xf7, 0x2a, 0x43, 0xa2, 0xfe, 0x4a, 0x5f, 0x97, 0xab};
static const srtp_cipher_test_case_t icm_test = {
    ICM_KEY_BYTES, icm_test_key, icm_test_iv, 32, icm_test_plaintext, 32, icm_test_ciphertext,
    0,             NULL,         0,           NULL};

static const srtp_cipher_type_t icm_type = {
    icm_alloc,  icm_dealloc, icm_init, NULL, icm_apply, icm_apply, icm_set_iv, NULL,
    "AES-128 counter mode (OpenSSL)", &icm_test, SRTP_AES_ICM_128};

static srtp_err_status_t icm_alloc(srtp_cipher_pointer_t *cp, int key_len, int tag_len) {
  (void)tag_len;
  if (key_len != ICM_KEY_BYTES) return srtp_err_status_bad_param; /* only AES-128 is offered */
  srtp_cipher_t *cipher = calloc(1, sizeof(*cipher));
  icm_state *s = calloc(1, sizeof(*s));
  EVP_CIPHER_CTX *evp = EVP_CIPHER_CTX_new();
  if (cipher == NULL || s == NULL || evp == NULL) {
    free(cipher);
    free(s);
    EVP_CIPHER_CTX_free(evp);
    return srtp_err_status_alloc_fail;
  }
  s->evp = evp;
  cipher->type = &icm_type;
  cipher->state = s;
  cipher->key_len = key_len;
  cipher->algorithm = SRTP_AES_ICM_128;
  *cp = cipher;
  return srtp_err_status_ok;
}

static srtp_err_status_t icm_dealloc(srtp_cipher_pointer_t cp) {
  icm_state *s = cp->state;
  if (s != NULL) {
    EVP_CIPHER_CTX_free(s->evp);
    memset(s, 0, sizeof(*s));
    free(s);
  }
  memset(cp, 0, sizeof(*cp));
  free(cp);
  return srtp_err_status_ok;
}

/* ---- HMAC-SHA1 ----------------------------------------------------------------------------- */

typedef struct {
  SHA_CTX inner_start; /* the hash after the key XOR ipad */
  SHA_CTX outer_start; /* the hash after the key XOR opad */
  SHA_CTX running;
} hmac_state;

static srtp_err_status_t hmac_alloc(srtp_auth_pointer_t *ap, int key_len, int out_len);
static srtp_err_status_t hmac_dealloc(srtp_auth_pointer_t ap);

static srtp_err_status_t hmac_init(void *state, const uint8_t *key, int key_len) {
  hmac_state *s = state;
  if (key_len < 0 || key_len > SHA1_BYTES) return srtp_err_status_bad_param;
  uint8_t pad[SHA1_BLOCK_BYTES];
  memset(pad, 0x36, sizeof(pad));
  for (int i = 0; i < key_len; i++) pad[i] ^= key[i];
  SHA1_Init(&s->inner_start);
  SHA1_Update(&s->inner_start, pad, sizeof(pad));
  memset(pad, 0x5c, sizeof(pad));
  for (int i = 0; i < key_len; i++) pad[i] ^= key[i];
  SHA1_Init(&s->outer_start);
  SHA1_Update(&s->outer_start, pad, sizeof(pad));
  memset(pad, 0, sizeof(pad));
  s->running = s->inner_start;
  return srtp_err_status_ok;
}

static srtp_err_status_t hmac_start(void *state) {
  hmac_state *s = state;
  s->running = s->inner_start;
  return srtp_err_status_ok;
}

static srtp_err_status_t hmac_update(void *state, const uint8_t *buffer, int octets) {
  hmac_state *s = state;
  if (octets < 0) return srtp_err_status_bad_param;
  SHA1_Update(&s->running, buffer, (size_t)octets);
  return srtp_err_status_ok;
}

static srtp_err_status_t hmac_compute(void *state, const uint8_t *buffer, int octets, int tag_len,
                                      uint8_t *tag) {
  hmac_state *s = state;
  if (octets < 0 || tag_len < 0 || tag_len > SHA1_BYTES) return srtp_err_status_bad_param;
  uint8_t inner[SHA1_BYTES];
  uint8_t outer[SHA1_BYTES];
  SHA1_Update(&s->running, buffer, (size_t)octets);
  SHA1_Final(inner, &s->running);
  SHA_CTX finish = s->outer_start;
  SHA1_Update(&finish, inner, sizeof(inner));
  SHA1_Final(outer, &finish);
  memcpy(tag, outer, (size_t)tag_len);
  return srtp_err_status_ok;
}

/* RFC 2202 test case 1. */
static const uint8_t hmac_test_key[SHA1_BYTES] = {0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b,
                                                  0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b,
                                                  0x0b, 0x0b, 0x0b, 0x0b, 0x0b, 0x0b};
static const uint8_t hmac_test_data[8] = {'H', 'i', ' ', 'T', 'h', 'e', 'r', 'e'};
static const uint8_t hmac_test_tag[SHA1_BYTES] = {0xb6, 0x17, 0x31, 0x86, 0x55, 0x05, 0x72,
                                                  0x64, 0xe2, 0x8b, 0xc0, 0xb6, 0xfb, 0x37,
                                                  0x8c, 0x8e, 0xf1, 0x46, 0xbe, 0x00};
static const srtp_auth_test_case_t hmac_test = {
    SHA1_BYTES, hmac_test_key, 8, hmac_test_data, SHA1_BYTES, hmac_test_tag, NULL};

static const srtp_auth_type_t hmac_type = {
    hmac_alloc, hmac_dealloc, hmac_init, hmac_compute, hmac_update, hmac_start,
    "HMAC-SHA1 (OpenSSL SHA-1)", &hmac_test, SRTP_HMAC_SHA1};

static srtp_err_status_t hmac_alloc(srtp_auth_pointer_t *ap, int key_len, int out_len) {
  if (key_len < 0 || key_len > SHA1_BYTES || out_len < 0 || out_len > SHA1_BYTES)
    return srtp_err_status_bad_param;
  srtp_auth_t *auth = calloc(1, sizeof(*auth));
  hmac_state *s = calloc(1, sizeof(*s));
  if (auth == NULL || s == NULL) {
    free(auth);
    free(s);
    return srtp_err_status_alloc_fail;
  }
  auth->type = &hmac_type;
  auth->state = s;
  auth->out_len = out_len;
  auth->key_len = key_len;
  auth->prefix_len = 0;
  *ap = auth;
  return srtp_err_status_ok;
}

static srtp_err_status_t hmac_dealloc(srtp_auth_pointer_t ap) {
  if (ap->state != NULL) {
    memset(ap->state, 0, sizeof(hmac_state));
    free(ap->state);
  }
  memset(ap, 0, sizeof(*ap));
  free(ap);
  return srtp_err_status_ok;
}

/* ---- registration -------------------------------------------------------------------------- */

int callgate_srtp_use_openssl(void) {
  int swapped = 0;
  if (srtp_replace_cipher_type(&icm_type, SRTP_AES_ICM_128) == srtp_err_status_ok)
    swapped |= CALLGATE_SRTP_OPENSSL_AES_CM;
  if (srtp_replace_auth_type(&hmac_type, SRTP_HMAC_SHA1) == srtp_err_status_ok)
    swapped |= CALLGATE_SRTP_OPENSSL_HMAC_SHA1;
  return swapped;
}

#endif /* CALLGATE_HAVE_LIBSRTP */
