package group

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func retentionConfig() Config {
	cfg := bubbleConfig()
	cfg.OffsetsRetention = time.Hour
	cfg.OffsetsRetentionCheckInterval = 10 * time.Minute
	return cfg
}

func TestSimpleGroupOffsetsExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newTestCoordinator(t, retentionConfig())
		ctx := context.Background()
		c.OffsetCommit(ctx, commitReq("simple", -1, "", "t1", map[int32]int64{0: 1}))
		short := commitReq("short", -1, "", "t1", map[int32]int64{0: 2})
		short.Version, short.RetentionTimeMillis = 2, (5 * time.Minute).Milliseconds()
		c.OffsetCommit(ctx, short)

		time.Sleep(15 * time.Minute)
		synctest.Wait()
		if got, _ := fetch(c, "short", "t1", false, 0); got[0].offset != -1 {
			t.Fatalf("offset with a 5-minute retention still there after 15 minutes: %+v", got[0])
		}
		if got, _ := fetch(c, "simple", "t1", false, 0); got[0].offset != 1 {
			t.Fatalf("offset gone early: %+v", got[0])
		}
		time.Sleep(65 * time.Minute) // expired at the 60-minute check, dropped at the next
		synctest.Wait()
		if gs := listGroups(c); len(gs) != 0 {
			t.Fatalf("groups left after expiry: %v", gs)
		}
		if got, _ := fetch(restart(t, s), "simple", "t1", false, 0); got[0].offset != -1 {
			t.Fatalf("expired offset back after restart: %+v", got[0])
		}
	})
}

func TestConsumerGroupOffsetsExpireOnceEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, s := newTestCoordinator(t, retentionConfig())
		ctx := context.Background()
		a := newClient(c, "g", "a") // subscribes to t1 only
		a.session = time.Hour
		stableGroup(t, ctx, a)
		c.OffsetCommit(ctx, commitReq("g", a.gen, a.id, "t1", map[int32]int64{0: 1}))
		c.OffsetCommit(ctx, commitReq("g", a.gen, a.id, "t2", map[int32]int64{0: 2}))

		for range 4 { // two hours, Stable
			time.Sleep(30 * time.Minute)
			a.heartbeat(ctx)
		}
		synctest.Wait()
		if got, _ := fetch(c, "g", "t2", false, 0); got[0].offset != -1 {
			t.Fatalf("unsubscribed topic's offset kept by a Stable group: %+v", got[0])
		}
		if got, _ := fetch(c, "g", "t1", false, 0); got[0].offset != 1 {
			t.Fatalf("subscribed topic's offset expired while Stable: %+v", got[0])
		}

		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Version, leave.Group, leave.MemberID = 1, "g", a.id
		c.LeaveGroup(ctx, leave)
		time.Sleep(50 * time.Minute)
		synctest.Wait()
		if got, _ := fetch(c, "g", "t1", false, 0); got[0].offset != 1 {
			t.Fatalf("offset expired 50 minutes after the group became Empty: %+v", got[0])
		}
		time.Sleep(40 * time.Minute) // offsets expire at the first check after an hour, the group at the next
		synctest.Wait()
		if gs := listGroups(c); len(gs) != 0 {
			t.Fatalf("groups left after expiry: %v", gs)
		}
		if gs := listGroups(restart(t, s)); len(gs) != 0 {
			t.Fatalf("groups back after restart: %v", gs)
		}
	})
}
