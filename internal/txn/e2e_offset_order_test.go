package txn_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kawa-broker/kawa/internal/kawatest"
)

// plainCommit commits topic/0 -> offset for group outside any transaction
// (generation -1, no member: an admin or a consumer without group management).
func plainCommit(t *testing.T, k *kawatest.Broker, group, topic string, offset int64) {
	t.Helper()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: offset, LeaderEpoch: -1})
	resp, err := k.Admin().CommitOffsets(ctxT(t), group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("OffsetCommit %s/0 -> %d: %v", topic, offset, err)
	}
}

// TestTxnOffsetCommitVsLaterPlainCommit: a transaction's staged offset
// replaces the committed one at commit only if its TxnOffsetCommit record is
// later in __consumer_offsets than the current offset's record (Kafka's
// GroupMetadata.completePendingTxnOffsetCommit / OffsetMetadataManager
// replayEndTransactionMarker). So TxnOffsetCommit(15), OffsetCommit(10),
// EndTxn(commit) leaves 10; aborting leaves the plain commit too; a commit
// staged after the plain one wins. Every answer is the same after a restart
// (full replay of the log), including when the restart falls between the
// plain commit and EndTxn.
func TestTxnOffsetCommitVsLaterPlainCommit(t *testing.T) {
	t.Parallel()
	k := kawatest.NewBroker(t)
	topic := name("oo")
	k.CreateTopic(topic, 1, nil)

	for _, c := range []struct {
		name                      string
		before, staged, plainThen int64 // plainThen < 0: no plain commit after staging
		commit, restartMid        bool
		want                      int64
	}{
		{name: "commit keeps later plain commit", before: -1, staged: 15, plainThen: 10, commit: true, want: 10},
		{name: "abort keeps later plain commit", before: -1, staged: 15, plainThen: 10, commit: false, want: 10},
		{name: "commit replaces earlier plain commit", before: 5, staged: 15, plainThen: -1, commit: true, want: 15},
		{name: "abort keeps earlier plain commit", before: 5, staged: 15, plainThen: -1, commit: false, want: 5},
		{name: "restart before commit keeps later plain commit", before: 3, staged: 15, plainThen: 10, commit: true, restartMid: true, want: 10},
		{name: "restart before commit replaces earlier plain commit", before: 5, staged: 15, plainThen: -1, commit: true, restartMid: true, want: 15},
	} {
		t.Run(c.name, func(t *testing.T) {
			group, txnID := name("g"), name("tx")
			if c.before >= 0 {
				plainCommit(t, k, group, topic, c.before)
			}
			r := newRaw(t, k, nil)
			p := r.mustInit(txnID, 60_000, nil)
			if code := r.addOffsets(txnID, p, group); code != 0 {
				t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(code))
			}
			m := &member{r: r, group: group, gen: -1}
			if code := m.txnCommit(txnID, p, topic, c.staged); code != 0 {
				t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(code))
			}
			if c.plainThen >= 0 {
				plainCommit(t, k, group, topic, c.plainThen)
			}
			if c.restartMid {
				k = k.Restart()
				r = newRaw(t, k, nil)
			}
			if resp := r.endTxn(txnID, p, c.commit); resp.ErrorCode != 0 {
				t.Fatalf("EndTxn(%v): %v", c.commit, kerr.ErrorForCode(resp.ErrorCode))
			}
			r.waitState(txnID, map[bool]string{false: "CompleteAbort", true: "CompleteCommit"}[c.commit])
			if got := committedOffset(t, k, group, topic, 0); got != c.want {
				t.Fatalf("committed offset %d, want %d", got, c.want)
			}
			k = k.Restart()
			if got := committedOffset(t, k, group, topic, 0); got != c.want {
				t.Fatalf("after restart: committed offset %d, want %d", got, c.want)
			}
		})
	}
}
