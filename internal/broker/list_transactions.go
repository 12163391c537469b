package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/txn"
	"github.com/kawa-broker/kawa/internal/wire"
)

// ListTransactions (key 66), versions 0-2 (KIP-664).
//
// Behaviour: every transactional.id this coordinator knows, with its producer
// ID and state, filtered by state names (unknown names are echoed in
// UnknownStateFilters and match nothing), producer IDs, v1+ a minimum
// duration of the open transaction (KIP-994) and v2+ a transactional.id
// regular expression (KIP-1152, RE2 syntax; an invalid one is
// INVALID_REGULAR_EXPRESSION). With an authorizer only the transactional
// IDs the principal may DESCRIBE are listed.
func (b *Broker) handleListTransactions(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ListTransactionsRequest)
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.Filter{ProducerIDs: r.ProducerIDFilters}
	for _, name := range r.StateFilters {
		if s, ok := txn.ParseState(name); ok {
			f.States = append(f.States, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	if len(r.StateFilters) > 0 && len(f.States) == 0 {
		return now(resp) // only unknown states asked for: nothing matches
	}
	if r.Version >= 1 && r.DurationFilterMillis > 0 {
		f.MinDuration = time.Duration(r.DurationFilterMillis) * time.Millisecond
	}
	if r.Version >= 2 && r.TransactionalIDPattern != nil {
		f.Pattern = *r.TransactionalIDPattern
	}
	ds, err := b.txn.List(f)
	resp.ErrorCode = errCode(err)
	for _, d := range ds {
		if !b.authorizedQuiet(info, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, d.TransactionalID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = d.TransactionalID, d.ProducerID, d.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return now(resp)
}
