package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// KDF is the memory-hard key derivation a board password is stored with:
// argon2id (RFC 9106) with these costs.
//
// The production costs, DefaultKDF, are OWASP's minimum for argon2id:
// 19 MiB of memory, 2 passes, 1 lane. Why these on a small board:
//   - Memory is what makes a guessing rig (GPU, ASIC) slow, so it is as
//     high as a board can spare: a Linux board has 512 MB or more; 19 MiB
//     for the moment of a login is affordable, 64 MiB or more is not while
//     the screen and media buffers are held.
//   - One lane: the boards have one to four slow cores that also drive the
//     screen; lanes would only buy the attacker parallelism we lack.
//   - A verification costs about 50 ms on a desktop core and a few hundred
//     on a Pi Zero 2 class core. To keep that off the hot path, a good
//     password is remembered for the running boot as an HMAC under a
//     random key held only in memory, so the gateway, which sends the
//     password with every request, pays the KDF once per boot; wrong
//     passwords always pay it (and the guess limit of httpapi bounds
//     them). Verifications run one at a time so a burst cannot take
//     n x 19 MiB.
type KDF struct {
	// Memory in KiB, Time in passes, Threads in lanes.
	Memory  uint32
	Time    uint32
	Threads uint8
}

// DefaultKDF is the production cost (see KDF).
var DefaultKDF = KDF{Memory: 19 * 1024, Time: 2, Threads: 1}

const (
	kdfKeyLen  = 32
	kdfSaltLen = 16
	phcPrefix  = "$argon2id$"
)

// ErrBadRecord means a stored password record cannot be read.
var ErrBadRecord = errors.New("web: bad password record")

// hashNew derives a new record for p: a PHC string
// $argon2id$v=19$m=M,t=T,p=P$salt$key (salt and key unpadded base64).
func (k KDF) hashNew(p string) string {
	salt := make([]byte, kdfSaltLen)
	_, _ = rand.Read(salt)
	key := argon2.IDKey([]byte(p), salt, k.Time, k.Memory, k.Threads, kdfKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("%sv=%d$m=%d,t=%d,p=%d$%s$%s", phcPrefix, argon2.Version, k.Memory, k.Time, k.Threads,
		b64.EncodeToString(salt), b64.EncodeToString(key))
}

// parsePHC reads a record made by hashNew.
func parsePHC(rec string) (k KDF, salt, key []byte, err error) {
	parts := strings.Split(rec, "$")
	// "", "argon2id", "v=19", "m=..,t=..,p=..", salt, key
	if len(parts) != 6 || parts[1] != "argon2id" {
		return k, nil, nil, ErrBadRecord
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return k, nil, nil, ErrBadRecord
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &k.Memory, &k.Time, &k.Threads); err != nil ||
		k.Memory < 8 || k.Time < 1 || k.Threads < 1 || k.Memory > 1<<22 || k.Time > 64 {
		return k, nil, nil, ErrBadRecord
	}
	b64 := base64.RawStdEncoding
	if salt, err = b64.DecodeString(parts[4]); err != nil || len(salt) < 8 {
		return k, nil, nil, ErrBadRecord
	}
	if key, err = b64.DecodeString(parts[5]); err != nil || len(key) < 16 {
		return k, nil, nil, ErrBadRecord
	}
	return k, salt, key, nil
}

// isLegacy reports whether a record is the old salted SHA-256 (hex).
func isLegacy(hash string) bool { return hash != "" && !strings.HasPrefix(hash, phcPrefix) }

// verifyRecord checks p against a stored record, either format.
func verifyRecord(salt, hash, p string) bool {
	if isLegacy(hash) {
		return subtle.ConstantTimeCompare([]byte(legacyHash(salt, p)), []byte(hash)) == 1
	}
	k, s, key, err := parsePHC(hash)
	if err != nil {
		return false
	}
	got := argon2.IDKey([]byte(p), s, k.Time, k.Memory, k.Threads, uint32(len(key)))
	return subtle.ConstantTimeCompare(got, key) == 1
}

// legacyHash is the record of boards before issue 25: one salted SHA-256,
// read only to upgrade it.
func legacyHash(salt, p string) string {
	h := sha256.Sum256([]byte(salt + "\x00" + p))
	return hex.EncodeToString(h[:])
}

// goodCache remembers the password that last verified, as an HMAC under a
// key that lives only in memory, for the record it verified against.
type goodCache struct {
	key    [32]byte
	record string
	mac    []byte
}

func newGoodCache() *goodCache {
	c := &goodCache{}
	_, _ = rand.Read(c.key[:])
	return c
}

func (c *goodCache) sum(p string) []byte {
	m := hmac.New(sha256.New, c.key[:])
	m.Write([]byte(p))
	return m.Sum(nil)
}
