package broker

import (
	"context"
	"maps"
	"path/filepath"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kawa-broker/kawa/internal/vfs"
	"github.com/kawa-broker/kawa/internal/wire"
)

// DescribeLogDirs (key 35), versions 1-4 (KIP-113; v3 top-level ErrorCode,
// KIP-784; v4 TotalBytes and UsableBytes, KIP-827; Kafka 4.x removed v0).
//
// Behaviour: one log dir, the data dir (absolute path), with the volume's
// total and usable bytes from statfs (-1 when the file system cannot say, as
// Kafka reports for remote storage), and for each live partition asked for
// (Topics null = every partition, internal topics included) its Size, the
// bytes of its segments' .log files, OffsetLag 0 and IsFuture false: one
// node has no future replicas (AlterReplicaLogDirs). As in Kafka's
// ReplicaManager.describeLogDirs, a topic or partition that does not exist,
// or is offline, is left out rather than given an error; topics are sorted
// by name, partitions by index.
//
// Authorization: DESCRIBE on the CLUSTER; without it the answer has no dirs
// and, from v3, ErrorCode CLUSTER_AUTHORIZATION_FAILED (Kafka's
// KafkaApis.handleDescribeLogDirsRequest).
func (b *Broker) handleDescribeLogDirs(ctx context.Context, info wire.RequestInfo, req kmsg.Request) reply {
	r := req.(*kmsg.DescribeLogDirsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !b.authorizedCluster(info, kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return now(resp)
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.cfg.DataDir
	if abs, err := filepath.Abs(b.cfg.DataDir); err == nil {
		dir.Dir = abs
	}
	if total, usable, err := vfs.Space(b.fs, b.cfg.DataDir); err == nil {
		dir.TotalBytes, dir.UsableBytes = total, usable
	} // else the defaults, -1: unknown
	dir.Topics = b.logDirTopics(r.Topics)
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return now(resp)
}

// logDirTopics lists the live partitions filter names (nil = all), with their sizes.
func (b *Broker) logDirTopics(filter []kmsg.DescribeLogDirsRequestTopic) []kmsg.DescribeLogDirsResponseDirTopic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	wanted := map[string][]int32{} // topic → partitions asked for
	if filter == nil {
		for name, ps := range b.parts {
			for i := range ps {
				wanted[name] = append(wanted[name], int32(i))
			}
		}
	}
	for _, t := range filter {
		wanted[t.Topic] = append(wanted[t.Topic], t.Partitions...)
	}
	var out []kmsg.DescribeLogDirsResponseDirTopic
	for _, name := range slices.Sorted(maps.Keys(wanted)) {
		ps := b.parts[name]
		idxs := slices.Compact(slices.Sorted(slices.Values(wanted[name])))
		rt := kmsg.NewDescribeLogDirsResponseDirTopic()
		rt.Topic = name
		for _, i := range idxs {
			if i < 0 || int(i) >= len(ps) || ps[i] == nil {
				continue // unknown or offline: not in this dir (Kafka lists only the logs it holds)
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size = i, ps[i].Size()
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			out = append(out, rt)
		}
	}
	return out
}
