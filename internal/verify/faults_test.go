package verify

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestScheduleReproducible(t *testing.T) {
	t.Parallel()
	kinds := []FaultKind{FaultKill, FaultClientCrash}
	a := Schedule(1, kinds, time.Minute, 13*time.Second)
	b := Schedule(1, kinds, time.Minute, 13*time.Second)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different schedules:\n%v\n%v", a, b)
	}
	if reflect.DeepEqual(a, Schedule(2, kinds, time.Minute, 13*time.Second)) {
		t.Fatal("seeds 1 and 2 gave the same schedule")
	}
	if len(a) == 0 {
		t.Fatal("empty schedule")
	}
	var last time.Duration
	seen := map[FaultKind]bool{}
	for _, f := range a {
		if f.At < 6*time.Second || f.At >= 48*time.Second {
			t.Errorf("fault at %v, outside [6s, 48s)", f.At)
		}
		if f.At <= last {
			t.Errorf("fault at %v not after the previous at %v", f.At, last)
		}
		last = f.At + f.Dur
		seen[f.Kind] = true
		if f.Kind == FaultKill && (f.Dur < 200*time.Millisecond || f.Dur > 2*time.Second) {
			t.Errorf("kill down time %v", f.Dur)
		}
	}
	if !seen[FaultKill] || !seen[FaultClientCrash] {
		t.Errorf("kinds seen %v, want both", seen)
	}
}

func TestSchedulePauseOutlastsTimeouts(t *testing.T) {
	t.Parallel()
	for _, f := range Schedule(7, []FaultKind{FaultPause}, 2*time.Minute, 13*time.Second) {
		if f.Kind != FaultPause || f.Dur != 13*time.Second {
			t.Errorf("fault %+v, want pause of 13s", f)
		}
	}
}

func TestScheduleNone(t *testing.T) {
	t.Parallel()
	if s := Schedule(1, nil, time.Minute, time.Second); s != nil {
		t.Errorf("schedule without kinds: %v", s)
	}
}

func TestParseFaults(t *testing.T) {
	t.Parallel()
	got, err := ParseFaults("kill, client-crash")
	if err != nil || !reflect.DeepEqual(got, []FaultKind{FaultKill, FaultClientCrash}) {
		t.Errorf("ParseFaults = %v, %v", got, err)
	}
	if got, err := ParseFaults("none"); got != nil || err != nil {
		t.Errorf("none = %v, %v", got, err)
	}
	if got, _ := ParseFaults("all"); len(got) != 5 {
		t.Errorf("all = %v", got)
	}
	if _, err := ParseFaults("kill,meteor"); err == nil {
		t.Error("unknown fault accepted")
	}
}

func TestParseSemantics(t *testing.T) {
	t.Parallel()
	got, err := ParseSemantics("exactly-once,at-most-once,exactly-once")
	if err != nil || !reflect.DeepEqual(got, []Semantic{ExactlyOnce, AtMostOnce}) {
		t.Errorf("ParseSemantics = %v, %v", got, err)
	}
	if _, err := ParseSemantics("maybe-once"); err == nil {
		t.Error("unknown semantic accepted")
	}
}

// TestPowerCutNeedsAPowerCutter: power-cut is parsed but not part of "all",
// and a run asking for it against a plain spawned broker is refused up
// front, naming the command that provides one.
func TestPowerCutNeedsAPowerCutter(t *testing.T) {
	t.Parallel()
	if got, err := ParseFaults("power-cut"); err != nil || !reflect.DeepEqual(got, []FaultKind{FaultPowerCut}) {
		t.Fatalf("ParseFaults(power-cut) = %v, %v", got, err)
	}
	all, _ := ParseFaults("all")
	for _, k := range all {
		if k == FaultPowerCut {
			t.Error(`"all" includes power-cut, which only a PowerCutter can inject`)
		}
	}
	cfg := Config{Semantics: AllSemantics, Faults: []FaultKind{FaultPowerCut}, Duration: time.Second,
		Launcher: InprocLauncher{}, Broker: &SpawnedBroker{}}
	err := cfg.validate()
	if err == nil || !strings.Contains(err.Error(), "cmd/kawa-powercut") {
		t.Fatalf("validate = %v, want a refusal naming cmd/kawa-powercut", err)
	}
}

func TestPlanDropAPIs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sems []Semantic
		want []int16
	}{
		{AllSemantics, dropAPIs},
		{[]Semantic{Share}, []int16{0, apiShareFetch, apiShareAcknowledge}},
		{[]Semantic{AtLeastOnce, Share}, []int16{0, 8, apiShareFetch, apiShareAcknowledge}},
		{[]Semantic{ExactlyOnce}, []int16{0, 8, 26, 28}},
	}
	for _, c := range cases {
		if got := planDropAPIs(NewPlan(PlanOptions{RunID: "t", Semantics: c.sems})); !slices.Equal(got, c.want) {
			t.Errorf("%v: %v, want %v", c.sems, got, c.want)
		}
	}
}
