package broker_test

import (
	"crypto/tls"
	"errors"
	"testing"

	"github.com/IBM/sarama"
	xscram "github.com/xdg-go/scram"

	"github.com/kawa-broker/kawa/internal/server"
)

// saramaSCRAM adapts xdg-go/scram to sarama's SCRAMClient (sarama ships the
// interface, not an implementation).
type saramaSCRAM struct {
	gen  xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (s *saramaSCRAM) Begin(user, pass, authzID string) error {
	cl, err := s.gen.NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	s.conv = cl.NewConversation()
	return nil
}

func (s *saramaSCRAM) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *saramaSCRAM) Done() bool                            { return s.conv.Done() }

// TestSaramaSASL: sarama (SaslHandshake v1 + SaslAuthenticate) logs in with
// PLAIN and SCRAM-SHA-512 and produces; a wrong password gets
// SASL_AUTHENTICATION_FAILED (issue 14 acceptance).
func TestSaramaSASL(t *testing.T) {
	t.Parallel()
	s := startSecure(t, server.SASLPlaintext, tls.NoClientCert)
	for _, mech := range []sarama.SASLMechanism{sarama.SASLTypePlaintext, sarama.SASLTypeSCRAMSHA512} {
		for _, pass := range []string{"alice-secret", "wrong"} {
			cfg := sarama.NewConfig()
			cfg.Version = sarama.V2_8_0_0
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Metadata.Retry.Max = 0
			cfg.Net.SASL.Enable = true
			cfg.Net.SASL.Version = sarama.SASLHandshakeV1
			cfg.Net.SASL.Mechanism = mech
			cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", pass
			if mech == sarama.SASLTypeSCRAMSHA512 {
				cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{gen: xscram.SHA512} }
			}
			prod, err := sarama.NewSyncProducer([]string{s.b.Addr}, cfg)
			if pass == "wrong" {
				if err == nil {
					prod.Close()
				}
				if !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
					t.Errorf("%s with a wrong password: err %v, want SASL_AUTHENTICATION_FAILED", mech, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", mech, err)
			}
			if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: "sarama-sasl", Value: sarama.StringEncoder("v")}); err != nil {
				t.Errorf("%s: produce: %v", mech, err)
			}
			prod.Close()
		}
	}
}
