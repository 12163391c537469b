package kawa_test

import (
	"os/exec"
	"strings"
	"testing"
)

// allowed lists, for each package of the module, the module packages and
// third-party packages it may import directly (design.md, "Packages"). The
// standard library is always allowed. Test files are not checked. A new
// package or edge must be added here on purpose.
var allowed = map[string][]string{
	"internal/config":    {},
	"internal/vfs":       {},
	"internal/meta":      {"internal/batch"}, // batch.Checksum: the one CRC-32C table
	"internal/wire":      {"twmb/franz-go/pkg/kbin", "twmb/franz-go/pkg/kmsg"},
	"internal/batch":     {"twmb/franz-go/pkg/kmsg", "twmb/franz-go/pkg/kerr", "klauspost/compress/", "pierrec/lz4/v4"},
	"internal/log":       {"internal/batch", "internal/vfs"},
	"internal/producer":  {"internal/batch", "twmb/franz-go/pkg/kerr"},
	"internal/partition": {"internal/log", "internal/producer", "internal/batch", "internal/vfs", "twmb/franz-go/pkg/kerr"},
	"internal/group":     {"twmb/franz-go/pkg/kmsg", "twmb/franz-go/pkg/kerr"},
	"internal/txn":       {"internal/producer", "internal/partition", "internal/batch", "twmb/franz-go/pkg/kmsg", "twmb/franz-go/pkg/kerr"},
	"internal/server":    {"internal/wire", "internal/config", "twmb/franz-go/pkg/kmsg"},
	"internal/proxy":     {"internal/wire", "twmb/franz-go/pkg/kmsg", "twmb/franz-go/pkg/kbin"},
	"internal/broker": {"internal/meta", "internal/partition", "internal/group", "internal/txn", "internal/wire",
		"internal/config", "internal/batch", "internal/log", "internal/producer",
		"twmb/franz-go/pkg/kmsg", "twmb/franz-go/pkg/kerr", "prometheus/client_golang/prometheus"},
	"internal/verify":   {"internal/proxy", "twmb/franz-go/pkg/", "prometheus/"},
	"internal/kawatest": {"internal/server", "internal/broker", "internal/config", "twmb/franz-go/pkg/kgo", "twmb/franz-go/pkg/kadm"},
	"cmd/kawa": {"internal/", "twmb/franz-go/pkg/", "prometheus/client_golang/", "outbox", "dedup", "sqlurl",
		"modernc.org/sqlite", "jackc/pgx/v5/stdlib"},
	// The public SDK never imports internal/ (design.md).
	"delivery":             {"twmb/franz-go/pkg/kgo", "twmb/franz-go/pkg/kadm", "twmb/franz-go/pkg/kmsg", "twmb/franz-go/pkg/kerr"},
	"delivery/prommetrics": {"delivery", "prometheus/client_golang/prometheus"},
	"dedup":                {"twmb/franz-go/pkg/kgo"},
	"outbox":               {"dedup", "twmb/franz-go/pkg/kgo", "twmb/franz-go/pkg/kadm", "twmb/franz-go/pkg/kmsg", "twmb/franz-go/pkg/kerr"},
	"outbox/pgnotify":      {"outbox", "jackc/pgx/v5", "jackc/pgx/v5/", "jackc/pgxlisten"},
	"internal/sqltest":     {"dedup", "sqlurl"},
	"sqlurl":               {"dedup", "modernc.org/sqlite", "jackc/pgx/v5/stdlib"},
	"examples/orders": {"sqlurl", "delivery", "dedup", "outbox", "outbox/pgnotify", "twmb/franz-go/pkg/",
		"modernc.org/sqlite", "jackc/pgx/v5/stdlib"},
}

const module = "github.com/kawa-broker/kawa/"

func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "github.com/kawa-broker/kawa")
		if pkg == "" {
			continue
		}
		rules, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %s is not in deps_test.go's table: add it with its allowed imports", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				continue // standard library
			}
			short := strings.TrimPrefix(strings.TrimPrefix(imp, module), "github.com/")
			if !permitted(short, rules) {
				t.Errorf("%s imports %s, which design.md does not allow", pkg, imp)
			}
		}
	}
}

func permitted(imp string, rules []string) bool {
	for _, r := range rules {
		if imp == r || (strings.HasSuffix(r, "/") && strings.HasPrefix(imp, r)) {
			return true
		}
	}
	return false
}
