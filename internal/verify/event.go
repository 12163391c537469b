package verify

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Kind names what an Event records. It is one byte in memory and its name
// (the "k" field) in the JSON history, so the names are the file format.
type Kind uint8

// Event kinds. Workers emit send through drained; the controller emits fault
// and, after the run, scan, end and group.
const (
	KindSend       Kind = iota + 1 // about to produce ID to Topic (Txn set inside a transaction)
	KindAck                        // the broker acknowledged ID at Part/Off; Lat is µs since send
	KindFail                       // the produce of ID failed with Err (it may still be in the log)
	KindProc                       // a group member processed ID at Part/Off in generation Gen
	KindRead                       // a reader (isolation Iso) returned ID at Part/Off; LSO from the same fetch
	KindCommit                     // offset commit of Part/Off by W in generation Gen; Err if it failed
	KindTxnEnd                     // W is about to end Txn; Commit says whether it asked to commit
	KindTxnDone                    // Txn ended: Commit=true committed, false aborted; Err = outcome unknown
	KindStart                      // worker W started
	KindExit                       // worker W exited; Err says why when it was not asked to stop
	KindDrained                    // reader W read every partition up to the end-of-run fence
	KindFault                      // fault Fault on W from T to End (unix ns)
	KindScan                       // end-of-run scan (isolation Iso) found ID at Part/Off
	KindEnd                        // end-of-run log end offset Off of Topic/Part (the fence excluded)
	KindGroup                      // end-of-run committed offset Off of group W on Topic/Part
	KindDeliver                    // share member W was delivered ID at Part/Off with delivery count Gen (ShareFetch AcquiredRecords)
	KindShareAck                   // W acknowledged its delivery Gen of ID with Ack; Commit: the broker confirmed it, else Err (outcome unknown)
	KindShareStart                 // end-of-run share-partition start offset Off of share group W on Topic/Part (DescribeShareGroupOffsets)
)

var kindNames = [...]string{"", "send", "ack", "fail", "proc", "read", "commit", "txn-end", "txn-done",
	"start", "exit", "drained", "fault", "scan", "end", "group", "deliver", "share-ack", "share-start"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText writes the kind's name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name; an unknown name is an error.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if i > 0 && n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("unknown event kind %q", b)
}

// Isolation is a fetch isolation level: "ru" (read_uncommitted) or "rc"
// (read_committed) in the history.
type Isolation uint8

// Isolation levels.
const (
	ReadUncommitted Isolation = iota + 1
	ReadCommitted
)

func (i Isolation) String() string {
	switch i {
	case ReadUncommitted:
		return "ru"
	case ReadCommitted:
		return "rc"
	}
	return ""
}

// MarshalText writes "ru" or "rc".
func (i Isolation) MarshalText() ([]byte, error) { return []byte(i.String()), nil }

// UnmarshalText reads "ru" or "rc".
func (i *Isolation) UnmarshalText(b []byte) error {
	switch string(b) {
	case "ru":
		*i = ReadUncommitted
	case "rc":
		*i = ReadCommitted
	default:
		return fmt.Errorf("unknown isolation %q", b)
	}
	return nil
}

// Event is one line of the history. Times are unix nanoseconds taken on the
// same host, so events of different processes can be ordered by T. Fields
// are ordered for size (152 bytes): histories of millions of events are
// held in memory.
type Event struct {
	T      int64     `json:"t"`
	Off    int64     `json:"o,omitempty"`
	LSO    int64     `json:"lso,omitempty"`
	End    int64     `json:"end,omitempty"`
	Lat    int64     `json:"lat,omitempty"`
	W      string    `json:"w,omitempty"`  // worker instance, or group name for KindGroup
	ID     string    `json:"id,omitempty"` // record id: "<producer instance>:<seq>"
	Topic  string    `json:"tp,omitempty"`
	Txn    string    `json:"x,omitempty"` // transaction tag: "<worker instance>/<n>"
	Err    string    `json:"err,omitempty"`
	Fault  string    `json:"f,omitempty"`
	Part   int32     `json:"p,omitempty"`
	Gen    int32     `json:"g,omitempty"`
	Kind   Kind      `json:"k"`
	Iso    Isolation `json:"iso,omitempty"`
	Commit bool      `json:"c,omitempty"`
	Ack    AckType   `json:"ack,omitempty"` // KindShareAck
}

// AckType is a KIP-932 acknowledgement type, by its protocol number
// (ShareAcknowledge AcknowledgeTypes: 1 accept, 2 release, 3 reject).
type AckType int8

// Acknowledgement types.
const (
	AckAccept  AckType = 1
	AckRelease AckType = 2
	AckReject  AckType = 3
)

func (a AckType) String() string {
	switch a {
	case AckAccept:
		return "accept"
	case AckRelease:
		return "release"
	case AckReject:
		return "reject"
	}
	return "ack(" + strconv.Itoa(int(a)) + ")"
}

// fenceID is the id of the end-of-run fence records; checkers skip it.
const fenceID = "fence"

// recordValue encodes what a record carries: its id and, when written in a
// transaction, the transaction tag.
func recordValue(id, txn string) []byte {
	if txn == "" {
		return []byte(id)
	}
	return []byte(id + "@" + txn)
}

// parseValue is the inverse of recordValue.
func parseValue(v []byte) (id, txn string) {
	s := string(v)
	if i := strings.IndexByte(s, '@'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// recordID is "<producer instance>:<seq>".
func recordID(producer string, seq int64) string {
	return producer + ":" + strconv.FormatInt(seq, 10)
}

// splitID returns the producer instance and sequence of a record id; ok is
// false for ids not made by recordID (the fence, foreign records).
func splitID(id string) (producer string, seq int64, ok bool) {
	i := strings.LastIndexByte(id, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(id[i+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return id[:i], n, true
}

// History collects every event of a run, in arrival order, and optionally
// streams each as a JSON line to a file. It is safe for concurrent use.
type History struct {
	mu     sync.Mutex
	events []Event
	out    *bufio.Writer
	strs   map[string]string // interned topic and worker names

	acked     atomic.Int64
	processed atomic.Int64
}

// NewHistory returns an empty history that also writes JSON lines to w
// (nil: memory only).
func NewHistory(w io.Writer) *History {
	h := &History{strs: make(map[string]string)}
	if w != nil {
		h.out = bufio.NewWriterSize(w, 1<<16)
	}
	return h
}

// Add appends events.
func (h *History) Add(evs ...Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range evs {
		e.Topic = h.internLocked(e.Topic)
		e.W = h.internLocked(e.W)
		h.events = append(h.events, e)
		switch e.Kind {
		case KindAck:
			h.acked.Add(1)
		case KindProc, KindDeliver:
			h.processed.Add(1)
		}
		if h.out != nil {
			b, _ := json.Marshal(e)
			h.out.Write(b)
			h.out.WriteByte('\n')
		}
	}
}

func (h *History) internLocked(s string) string {
	if s == "" {
		return s
	}
	if v, ok := h.strs[s]; ok {
		return v
	}
	h.strs[s] = s
	return s
}

// Events returns the events so far. Events are only ever appended, so the
// returned slice stays valid; it must not be modified.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.events[:len(h.events):len(h.events)]
}

// Acked is the number of ack events so far.
func (h *History) Acked() int64 { return h.acked.Load() }

// Processed is the number of proc and deliver events so far.
func (h *History) Processed() int64 { return h.processed.Load() }

// Flush writes buffered JSON lines to the file.
func (h *History) Flush() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.out == nil {
		return nil
	}
	return h.out.Flush()
}

// ReadHistory decodes a JSON-lines history. A torn last line (a worker killed
// mid-write) is skipped, as the controller does when it reads a pipe.
func ReadHistory(r io.Reader) ([]Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	var out []Event
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
