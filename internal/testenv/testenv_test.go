package testenv

import "testing"

func TestRequireReturnsValue(t *testing.T) {
	t.Setenv("TRIBUTARY_TESTENV_PROBE", "http://127.0.0.1:1")
	if got := Require(t, "TRIBUTARY_TESTENV_PROBE"); got != "http://127.0.0.1:1" {
		t.Fatalf("Require = %q, want the variable's value", got)
	}
}

func TestRequireSkipsWhenUnset(t *testing.T) {
	t.Setenv("TRIBUTARY_TESTENV_PROBE", "")
	var skipped bool
	t.Run("inner", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Require(t, "TRIBUTARY_TESTENV_PROBE")
		t.Error("Require returned for an unset variable")
	})
	if !skipped {
		t.Fatal("Require did not skip the test")
	}
}
