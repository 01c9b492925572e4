// A SCRAM client (RFC 5802) for Sarama, from the standard library alone: Sarama 1.22
// leaves the SCRAM conversation to the application, and Debian ships no SCRAM package
// that builds with it offline.
package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

type scramClient struct {
	hash        func() hash.Hash
	user        string
	password    string
	nonce       string
	clientFirst string
	serverKey   []byte
	authMessage string
	step        int
}

func newScramClient(mechanism string) *scramClient {
	if mechanism == "SCRAM-SHA-512" {
		return &scramClient{hash: sha512.New}
	}
	return &scramClient{hash: sha256.New}
}

func (c *scramClient) Begin(user, password, _ string) error {
	raw := make([]byte, 18)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	name := strings.NewReplacer("=", "=3D", ",", "=2C").Replace(user)
	c.user, c.password, c.nonce = name, password, base64.RawStdEncoding.EncodeToString(raw)
	c.clientFirst = "n=" + name + ",r=" + c.nonce
	return nil
}

func (c *scramClient) mac(key []byte, message string) []byte {
	m := hmac.New(c.hash, key)
	m.Write([]byte(message))
	return m.Sum(nil)
}

// pbkdf2 with one output block: SCRAM's Hi(password, salt, i).
func (c *scramClient) hi(salt []byte, iterations int) []byte {
	m := hmac.New(c.hash, []byte(c.password))
	m.Write(salt)
	m.Write([]byte{0, 0, 0, 1})
	u := m.Sum(nil)
	out := append([]byte(nil), u...)
	for i := 1; i < iterations; i++ {
		m.Reset()
		m.Write(u)
		u = m.Sum(nil)
		for j := range out {
			out[j] ^= u[j]
		}
	}
	return out
}

func (c *scramClient) Step(challenge string) (string, error) {
	c.step++
	switch c.step {
	case 1:
		return "n,," + c.clientFirst, nil
	case 2:
		fields := map[string]string{}
		for _, field := range strings.Split(challenge, ",") {
			if len(field) > 2 && field[1] == '=' {
				fields[field[:1]] = field[2:]
			}
		}
		salt, err := base64.StdEncoding.DecodeString(fields["s"])
		iterations, convErr := strconv.Atoi(fields["i"])
		if err != nil || convErr != nil || !strings.HasPrefix(fields["r"], c.nonce) {
			return "", fmt.Errorf("bad server-first message %q", challenge)
		}
		salted := c.hi(salt, iterations)
		clientKey := c.mac(salted, "Client Key")
		h := c.hash()
		h.Write(clientKey)
		storedKey := h.Sum(nil)
		withoutProof := "c=biws,r=" + fields["r"]
		c.authMessage = c.clientFirst + "," + challenge + "," + withoutProof
		signature := c.mac(storedKey, c.authMessage)
		for i := range clientKey {
			clientKey[i] ^= signature[i]
		}
		c.serverKey = c.mac(salted, "Server Key")
		return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(clientKey), nil
	case 3:
		want := "v=" + base64.StdEncoding.EncodeToString(c.mac(c.serverKey, c.authMessage))
		if challenge != want {
			return "", errors.New("server signature does not match")
		}
		return "", nil
	}
	return "", errors.New("SCRAM conversation already finished")
}

func (c *scramClient) Done() bool { return c.step >= 3 }
