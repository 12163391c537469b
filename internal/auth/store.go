// Package auth is Kawa's security core: the SASL mechanisms (PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512), the SCRAM credential store, which keeps only
// salted keys, and (later) the authorizer. The server and the broker ask it;
// it never imports them.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/xdg-go/scram"

	"github.com/kawa-broker/kawa/internal/vfs"
)

// SASL mechanism names, as clients send them in SaslHandshake.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Kafka's bounds on SCRAM iterations (ScramMechanism's minIterations and
// maxIterations): AlterUserScramCredentials outside them is
// UNACCEPTABLE_CREDENTIAL.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// CredentialsFile is the store's file in the data directory.
const CredentialsFile = "scram-credentials.json"

// ErrUnknownMechanism is a mechanism that is not SCRAM-SHA-256 or -512.
var ErrUnknownMechanism = errors.New("unsupported SCRAM mechanism")

// ErrIterations is an iteration count outside MinIterations..MaxIterations.
var ErrIterations = fmt.Errorf("iterations must be between %d and %d", MinIterations, MaxIterations)

// ErrNoCredential is a delete of a user/mechanism pair that has none.
var ErrNoCredential = errors.New("no such SCRAM credential")

// Credential is what is kept for one user and mechanism: the salt and
// iteration count, StoredKey = H(HMAC(salted password, "Client Key")) and
// ServerKey = HMAC(salted password, "Server Key") (RFC 5802 section 3; KIP-554,
// Kafka's UserScramCredentialRecord). Never the password, never the salted
// password.
type Credential struct {
	Iterations int    `json:"iterations"`
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// Store holds SCRAM credentials by user and mechanism, persisted in
// dir/CredentialsFile with vfs.WriteFileAtomic after every change (a change
// is acknowledged only once durable). Safe for concurrent use.
type Store struct {
	fsys vfs.FS
	path string // "" for a store kept in memory only

	mu    sync.RWMutex
	users map[string]map[string]Credential // user -> mechanism -> credential
}

// NewMemStore returns an empty store that is not persisted (tests, brokers
// without a data directory).
func NewMemStore() *Store { return &Store{users: map[string]map[string]Credential{}} }

// OpenStore loads the store in dir (an absent file is an empty store).
func OpenStore(fsys vfs.FS, dir string) (*Store, error) {
	s := &Store{fsys: fsys, path: filepath.Join(dir, CredentialsFile), users: map[string]map[string]Credential{}}
	b, err := vfs.ReadFile(fsys, s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("auth: read credentials: %w", err)
	}
	if err := json.Unmarshal(b, &s.users); err != nil {
		return nil, fmt.Errorf("auth: %s: %w", s.path, err)
	}
	if s.users == nil {
		s.users = map[string]map[string]Credential{}
	}
	return s, nil
}

func hashFor(mech string) (func() hash.Hash, scram.HashGeneratorFcn, error) {
	switch mech {
	case ScramSHA256:
		return sha256.New, scram.SHA256, nil
	case ScramSHA512:
		return sha512.New, scram.SHA512, nil
	}
	return nil, nil, fmt.Errorf("%w: %q", ErrUnknownMechanism, mech)
}

// CheckIterations returns ErrIterations unless n is within Kafka's bounds.
func CheckIterations(n int) error {
	if n < MinIterations || n > MaxIterations {
		return ErrIterations
	}
	return nil
}

// NewCredential derives the credential of password with a fresh random salt
// (32 bytes, as Kafka's ScramFormatter) and the given iterations.
func NewCredential(mech, password string, iterations int) (Credential, error) {
	_, gen, err := hashFor(mech)
	if err != nil {
		return Credential{}, err
	}
	if err := CheckIterations(iterations); err != nil {
		return Credential{}, err
	}
	salt := make([]byte, 32)
	_, _ = rand.Read(salt)
	c, err := gen.NewClient("", password, "")
	if err != nil {
		return Credential{}, err
	}
	sc, err := c.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iterations})
	if err != nil {
		return Credential{}, err
	}
	return Credential{Iterations: iterations, Salt: salt, StoredKey: sc.StoredKey, ServerKey: sc.ServerKey}, nil
}

// CredentialFromSalted derives the credential from a salted password computed
// by the client (AlterUserScramCredentials' upsertion, KIP-554).
func CredentialFromSalted(mech string, iterations int, salt, salted []byte) (Credential, error) {
	h, _, err := hashFor(mech)
	if err != nil {
		return Credential{}, err
	}
	if err := CheckIterations(iterations); err != nil {
		return Credential{}, err
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	ck := h()
	ck.Write(mac(salted, "Client Key"))
	return Credential{Iterations: iterations, Salt: slices.Clone(salt), StoredKey: ck.Sum(nil), ServerKey: mac(salted, "Server Key")}, nil
}

// Set stores c for user and mechanism, replacing any previous one, and
// returns once the store is durable.
func (s *Store) Set(user, mech string, c Credential) error {
	if _, _, err := hashFor(mech); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, had := s.users[user][mech]
	if s.users[user] == nil {
		s.users[user] = map[string]Credential{}
	}
	s.users[user][mech] = c
	if err := s.persistLocked(); err != nil {
		if had {
			s.users[user][mech] = prev
		} else {
			s.dropLocked(user, mech)
		}
		return err
	}
	return nil
}

// SetPassword stores a fresh credential of password for user and mech (a
// new random salt), as `kawa user set` and kafka-storage's --add-scram do.
func (s *Store) SetPassword(user, mech, password string, iterations int) error {
	c, err := NewCredential(mech, password, iterations)
	if err != nil {
		return err
	}
	return s.Set(user, mech, c)
}

// Change is one alteration for Apply: a deletion of User's credential for
// Mechanism, or (Delete false) setting it to Credential.
type Change struct {
	User, Mechanism string
	Delete          bool
	Credential      Credential
}

// Apply makes changes all at once, with one durable write: either all of
// them hold afterwards or (on an error) none. A deletion of a missing
// credential is ErrNoCredential; check with Lookup first to report it per user.
func (s *Store) Apply(changes []Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := make(map[string]map[string]Credential, len(s.users))
	for u, ms := range s.users {
		prev[u] = maps.Clone(ms)
	}
	for _, c := range changes {
		if _, _, err := hashFor(c.Mechanism); err != nil {
			s.users = prev
			return err
		}
		if c.Delete {
			if _, ok := s.users[c.User][c.Mechanism]; !ok {
				s.users = prev
				return ErrNoCredential
			}
			s.dropLocked(c.User, c.Mechanism)
			continue
		}
		if s.users[c.User] == nil {
			s.users[c.User] = map[string]Credential{}
		}
		s.users[c.User][c.Mechanism] = c.Credential
	}
	if err := s.persistLocked(); err != nil {
		s.users = prev
		return err
	}
	return nil
}

// Delete removes the credential of user for mech (ErrNoCredential if none).
func (s *Store) Delete(user, mech string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.users[user][mech]
	if !ok {
		return ErrNoCredential
	}
	s.dropLocked(user, mech)
	if err := s.persistLocked(); err != nil {
		if s.users[user] == nil {
			s.users[user] = map[string]Credential{}
		}
		s.users[user][mech] = prev
		return err
	}
	return nil
}

func (s *Store) dropLocked(user, mech string) {
	delete(s.users[user], mech)
	if len(s.users[user]) == 0 {
		delete(s.users, user)
	}
}

func (s *Store) persistLocked() error {
	if s.path == "" {
		return nil
	}
	b, err := json.Marshal(s.users)
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(s.fsys, s.path, b); err != nil {
		return fmt.Errorf("auth: write credentials: %w", err)
	}
	return nil
}

// Lookup returns the credential of user for mech.
func (s *Store) Lookup(user, mech string) (Credential, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.users[user][mech]
	return c, ok
}

// Info is one credential as DescribeUserScramCredentials shows it: the
// mechanism and iterations, never the keys.
type Info struct {
	Mechanism  string
	Iterations int
}

// Users returns every user's credentials (mechanism and iterations only),
// mechanisms sorted.
func (s *Store) Users() map[string][]Info {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string][]Info, len(s.users))
	for u, ms := range s.users {
		for m, c := range ms {
			out[u] = append(out[u], Info{Mechanism: m, Iterations: c.Iterations})
		}
		slices.SortFunc(out[u], func(a, b Info) int { return strings.Compare(a.Mechanism, b.Mechanism) })
	}
	return out
}
