package broker

import (
	"context"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListPartitionReassignments (key 46), version 0 (KIP-455).
//
// Behaviour: no reassignment is ever in progress, so the answer lists no
// topics, for named partitions and for all (null topics) alike, as Kafka
// does for partitions that are not being reassigned.
func (b *Broker) handleListPartitionReassignments(ctx context.Context, _ wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.ListPartitionReassignmentsRequest)
	return now(r.ResponseKind())
}
