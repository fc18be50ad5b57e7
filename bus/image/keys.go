package image

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"
)

// GenerateKey makes a new ECDSA P-256 signing key.
func GenerateKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	return k, nil
}

// MarshalPrivateKey encodes a signing key as PEM ("EC PRIVATE KEY", the
// SEC 1 form espsecure writes).
func MarshalPrivateKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// MarshalPublicKey encodes a public key as PEM ("PUBLIC KEY", PKIX).
func MarshalPublicKey(pub *ecdsa.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePrivateKey reads a P-256 signing key from PEM: "EC PRIVATE KEY"
// (SEC 1) or "PRIVATE KEY" (PKCS #8).
func ParsePrivateKey(b []byte) (*ecdsa.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%w: no PEM block", ErrKey)
	}
	var key any
	var err error
	switch blk.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(blk.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	default:
		return nil, fmt.Errorf("%w: PEM block %q is not a private key", ErrKey, blk.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	k, ok := key.(*ecdsa.PrivateKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: only ECDSA P-256 keys are used", ErrKey)
	}
	return k, nil
}

// ParsePublicKey reads a P-256 public key from PEM: "PUBLIC KEY", or a
// private key whose public half is taken.
func ParsePublicKey(b []byte) (*ecdsa.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%w: no PEM block", ErrKey)
	}
	if blk.Type != "PUBLIC KEY" {
		k, err := ParsePrivateKey(b)
		if err != nil {
			return nil, err
		}
		return &k.PublicKey, nil
	}
	return parsePKIX(blk.Bytes)
}

func parsePKIX(der []byte) (*ecdsa.PublicKey, error) {
	key, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	pub, ok := key.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%w: only ECDSA P-256 keys are used", ErrKey)
	}
	return pub, nil
}

// LinkKey is a public key in one line: the base64 of its PKIX DER (the
// body of its PEM without the armour). Firmware built with keys carries
// them in this form (go build -ldflags -X; see package efuse).
func LinkKey(pub *ecdsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrKey, err)
	}
	return base64.StdEncoding.EncodeToString(der), nil
}

// ParseLinkKey reads a LinkKey.
func ParseLinkKey(s string) (*ecdsa.PublicKey, error) {
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKey, err)
	}
	return parsePKIX(der)
}
