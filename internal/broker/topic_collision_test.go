package broker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// TestTopicNameCollision: as in Kafka, a topic whose name equals an
// existing one's once '.' and '_' are taken as one character is refused
// with INVALID_TOPIC_EXCEPTION naming the existing topic (their metric names
// would be the same); names that differ otherwise, and the same name after
// the first is deleted, are accepted.
func TestTopicNameCollision(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	adm := k.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "a.b_c"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a_b_c", "a.b.c", "a_b.c"} {
		r, _ := adm.CreateTopic(ctx, 1, 1, nil, name) // the error is r.Err
		if !errors.Is(r.Err, kerr.InvalidTopicException) || !strings.Contains(r.ErrMessage, `"a.b_c"`) {
			t.Errorf("create %s beside a.b_c: %v (%s), want INVALID_TOPIC_EXCEPTION naming a.b_c", name, r.Err, r.ErrMessage)
		}
	}
	for _, name := range []string{"a.b_cd", "ab_c"} {
		if r, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil || r.Err != nil {
			t.Errorf("create %s: %v %v", name, err, r.Err)
		}
	}
	if _, err := adm.DeleteTopic(ctx, "a.b_c"); err != nil {
		t.Fatal(err)
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "a_b_c"); err != nil || r.Err != nil {
		t.Errorf("create a_b_c after a.b_c was deleted: %v %v", err, r.Err)
	}
}
