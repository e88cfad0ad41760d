package esfence

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/tributary-dev/tributary/internal/search/searchtest"
	"github.com/tributary-dev/tributary/internal/stocktest"
	"github.com/tributary-dev/tributary/statestore"
)

// The fix a refusal quotes: the rule that enforces the requirement while keeping every other
// name's outcome, and the request that makes it effective.
func TestJudgeAutoCreate(t *testing.T) {
	for _, c := range []struct {
		value, level string
		found        bool
		enforced     bool
		rule         string
		request      string
	}{
		{"true", "default", true, false, StandardRule, `PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+*"}}`},
		{"true", "persistent", true, false, StandardRule, `PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+*"}}`},
		{"", "", false, false, StandardRule, `PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+*"}}`},
		{"+logs-*,-*", "persistent", true, true, "", ""}, // no rule lets df-w-* through, the last forbids it
		{"+logs-*,+*", "persistent", true, false, "-df-w-*,+logs-*,+*", `PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+logs-*,+*"}}`},
		{"+d*", "transient", true, false, "-df-w-*,+d*",
			`PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+d*"},"transient":{"action.auto_create_index":null}}`},
		{"-df-w-*,", "persistent", true, false, StandardRule, `PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+*"}}`}, // invalid
		{"false", "persistent", true, true, "", ""},
		{"-df-w-*,+*", "persistent", true, true, "", ""},
	} {
		a := judgeAutoCreate(c.value, c.level, c.found)
		if a.Enforced != c.enforced || a.Rule != c.rule || a.Request() != c.request || (a.Why == "") != c.enforced {
			t.Errorf("%q (%s): %+v, request %q; want enforced=%v rule %q request %q", c.value, c.level, a, a.Request(), c.enforced, c.rule, c.request)
		}
		if !a.Enforced && autoCreateVerdict(a.Rule) != nil {
			t.Errorf("%q: the proposed rule %q is not proven", c.value, a.Rule)
		}
	}
	if a := judgeAutoCreate("true", "default", true); !strings.Contains(a.Why, "default") {
		t.Errorf("an unset value is not called the default: %q", a.Why)
	}
}

// The proposed rule is proven for random rule lists, and every name that does not start with
// df-w- keeps the outcome the cluster's own rules give it.
func TestProposedRuleKeepsOtherNames(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("dfw-ab*")
	names := []string{""}
	for i := 0; i < len(names) && len(names) < 3000; i++ {
		if len(names[i]) < 5 {
			for _, c := range "dfw-ab" {
				names = append(names, names[i]+string(c))
			}
		}
	}
	outcome := func(value, name string) bool {
		all, rules, err := parseAutoCreate(value)
		if err != nil {
			t.Fatalf("%q: %v", value, err)
		}
		if all != nil {
			return *all
		}
		for _, ru := range rules {
			if simpleMatch(ru.pattern, name) {
				return ru.allow
			}
		}
		return false
	}
	for i := 0; i < 300; i++ {
		var parts []string
		for n := 1 + r.IntN(4); n > 0; n-- {
			var b strings.Builder
			b.WriteString([]string{"+", "-", ""}[r.IntN(3)])
			for k := 1 + r.IntN(4); k > 0; k-- {
				b.WriteByte(alphabet[r.IntN(len(alphabet))])
			}
			parts = append(parts, b.String())
		}
		value := strings.Join(parts, ",")
		if _, _, err := parseAutoCreate(value); err != nil {
			continue // a bare + or -: no cluster takes it, and there are no rules to keep
		}
		a := judgeAutoCreate(value, "persistent", true)
		if a.Enforced {
			continue
		}
		if autoCreateVerdict(a.Rule) != nil {
			t.Fatalf("%q: proposed %q is not proven", value, a.Rule)
		}
		for _, n := range names {
			if !strings.HasPrefix(n, internalPrefix) && outcome(value, n) != outcome(a.Rule, n) {
				t.Fatalf("%q -> %q changes the outcome for %q", value, a.Rule, n)
			}
		}
	}
}

// stockFence is a Fence of a fake node whose settings are a stock cluster's.
func stockFence(t *testing.T) (*Fence, *stocktest.Settings) {
	t.Helper()
	c := searchtest.New(t, nil)
	s := stocktest.New()
	s.Install(c)
	f, err := New(c.Client(t), statestore.NewMemory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return f, s
}

// On a stock cluster the check and every claim refuse with the request that fixes it; the
// request, once sent, makes both pass; a transient value is reset by it, its rules kept.
func TestCheckAndEnforceAutoCreate(t *testing.T) {
	ctx := context.Background()
	f, s := stockFence(t)
	const want = `PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+*"}}`
	err := f.CheckAutoCreate(ctx)
	ce := wantRefusal(t, err, FencingUnenforced, Destination{})
	if !strings.Contains(ce.Detail, want) || !strings.HasPrefix(err.Error(), "sink_destination_conflict (fencing_unenforced): action.auto_create_index is true") {
		t.Fatalf("the check's refusal %q does not quote %s", err, want)
	}
	d := stubDest()
	_, err = f.Ensure(ctx, d)
	if ce := wantRefusal(t, err, FencingUnenforced, d); !strings.Contains(ce.Detail, want) {
		t.Fatalf("the claim's refusal %q does not quote %s", err, want)
	}

	a, err := f.ReadAutoCreate(ctx)
	if err != nil || a.Enforced || a.Value != "true" || a.Level != "default" || a.ClusterUUID != "fake-cluster-uuid" || a.Request() != want {
		t.Fatalf("ReadAutoCreate = %+v, %v", a, err)
	}
	s.Deny(false, true)
	var se *ServerError
	if _, err := f.EnforceAutoCreate(ctx, a); !errors.As(err, &se) || se.Status != http.StatusForbidden {
		t.Fatalf("EnforceAutoCreate without the privilege = %v, want the 403", err)
	}
	s.Deny(false, false)
	if a, err = f.EnforceAutoCreate(ctx, a); err != nil || !a.Enforced || a.Value != StandardRule || a.Level != "persistent" {
		t.Fatalf("EnforceAutoCreate = %+v, %v", a, err)
	}
	if err := f.CheckAutoCreate(ctx); err != nil {
		t.Fatal("the check after the fix:", err)
	}
	if _, err := f.Ensure(ctx, d); err != nil {
		t.Fatal("a claim after the fix:", err)
	}
	if _, err := f.EnforceAutoCreate(ctx, a); err != nil || len(s.Updates()) != 1 {
		t.Fatalf("enforcing it again sent a request (%v, %d updates)", err, len(s.Updates()))
	}

	// A transient value overrides the persistent one: the fix resets it, keeping its rules.
	logs := "+logs-*,+*"
	s.Set("transient", &logs)
	a, err = f.ReadAutoCreate(ctx)
	if err != nil || a.Enforced || a.Level != "transient" || a.Rule != "-df-w-*,+logs-*,+*" ||
		a.Request() != `PUT _cluster/settings {"persistent":{"action.auto_create_index":"-df-w-*,+logs-*,+*"},"transient":{"action.auto_create_index":null}}` {
		t.Fatalf("ReadAutoCreate with a transient value = %+v (%s), %v", a, a.Request(), err)
	}
	if a, err = f.EnforceAutoCreate(ctx, a); err != nil || !a.Enforced || a.Level != "persistent" || s.Effective() != "-df-w-*,+logs-*,+*" {
		t.Fatalf("EnforceAutoCreate = %+v, %v (effective %q)", a, err, s.Effective())
	}

	// Without the monitor privilege the setting cannot be read: a refusal naming it.
	s.Deny(true, false)
	if ce := wantRefusal(t, f.CheckAutoCreate(ctx), FencingUnenforced, Destination{}); !strings.Contains(ce.Detail, "monitor") {
		t.Fatalf("refusal without the monitor privilege: %q", ce.Detail)
	}
}
