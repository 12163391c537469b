package broker

import (
	"context"

	"github.com/kawa-broker/kawa/internal/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteTopics (key 20), versions 1-6.
//
// Behaviour: deletes by name, or by topic ID from v6 (KIP-516). Unknown
// topics get UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by ID). Internal
// topics cannot be deleted. Deletion removes the catalog entry durably, then
// the partition directories, then every group's committed and staged offsets
// of the topic (Kafka's onPartitionsDeleted), so a topic created again under
// the name starts without committed offsets. With an authorizer, DELETE on
// the topic is needed, else TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) handleDeleteTopics(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DeleteTopicsRequest)
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	names := r.TopicNames
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if r.Version >= 6 {
		for _, t := range r.Topics {
			targets = append(targets, target{name: t.Topic, id: t.TopicID})
		}
	} else {
		for i := range names {
			targets = append(targets, target{name: &names[i]})
		}
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.TopicID = tg.id
		var err error
		if tg.name == nil || *tg.name == "" {
			t, ok := b.catalog.ByID(tg.id)
			if !ok {
				err = kerr.UnknownTopicID
			} else {
				name := t.Name
				st.Topic = &name
				err = b.deleteTopicAs(ctx, info, name)
			}
		} else {
			st.Topic = tg.name
			if t, ok := b.catalog.Get(*tg.name); ok {
				st.TopicID = t.ID
			}
			err = b.deleteTopicAs(ctx, info, *tg.name)
		}
		st.ErrorCode = errCode(err)
		if r.Version >= 5 && err != nil {
			st.ErrorMessage = errMsg(err)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return now(resp)
}

// deleteTopicAs deletes name if the request may (DELETE on the topic).
func (b *Broker) deleteTopicAs(ctx context.Context, info wire.RequestInfo, name string) error {
	if !b.authorized(info, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, name) {
		return kerr.TopicAuthorizationFailed
	}
	return b.deleteTopic(ctx, name)
}
