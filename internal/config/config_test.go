package config

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestSecretNeverPrints(t *testing.T) {
	const pw = "hunter2-very-secret"
	s := Secret(pw)
	type holder struct {
		S Secret `yaml:"s" json:"s"`
	}
	h := holder{s}
	j, _ := json.Marshal(h)
	y, _ := yaml.Marshal(h)
	outs := []string{
		s.String(), s.GoString(), string(j), string(y),
		fmt.Sprintf("%v %+v %#v %s %q %x %X %d", s, s, s, s, s, s, s, s),
		fmt.Sprintf("%v %+v %#v", h, h, &h),
	}
	for _, o := range outs {
		if strings.Contains(o, pw) || strings.Contains(o, "68756e746572") {
			t.Fatalf("secret leaked: %s", o)
		}
		if !strings.Contains(o, Redacted) {
			t.Fatalf("%q does not say the secret is set", o)
		}
	}
	if got := fmt.Sprint(Secret("")); got != "" {
		t.Fatalf("an unset secret prints %q, want nothing", got)
	}
}

func TestDurationYAML(t *testing.T) {
	var v struct {
		D Duration `yaml:"d"`
	}
	if err := yaml.Unmarshal([]byte("d: 1m30s\n"), &v); err != nil || v.D.Std() != 90*time.Second {
		t.Fatalf("1m30s: %v %v", err, v.D)
	}
	out, _ := yaml.Marshal(v)
	if string(out) != "d: 1m30s\n" {
		t.Fatalf("marshalled %q", out)
	}
	for _, bad := range []string{"d: soon-secret\n", "d: [1]\n", "d: 30\n"} {
		err := yaml.Unmarshal([]byte(bad), &v)
		if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: %v, want an error naming the line and not the value", bad, err)
		}
	}
}

func TestParseAndDecode(t *testing.T) {
	t.Setenv("CFG_TEST_PW", "pw-secret-1")
	t.Setenv("CFG_TEST_N", "7")
	type section struct {
		Password Secret   `yaml:"password"`
		N        int      `yaml:"n"`
		Wait     Duration `yaml:"wait"`
	}
	root, err := Parse([]byte("section:\n  password: ${CFG_TEST_PW}\n  n: ${CFG_TEST_N}\n  wait: 2s\n"))
	if err != nil {
		t.Fatal(err)
	}
	var top struct {
		Section yaml.Node `yaml:"section"`
	}
	if err := root.Decode(&top); err != nil {
		t.Fatal(err)
	}
	var s section
	if err := Decode(&top.Section, &s); err != nil {
		t.Fatal(err)
	}
	if string(s.Password) != "pw-secret-1" || s.N != 7 || s.Wait.Std() != 2*time.Second {
		t.Fatalf("decoded %+v", s)
	}

	// An unknown key is named; a secret in a field of the wrong type is not echoed.
	root, _ = Parse([]byte("passwrd: x\n"))
	if err := Decode(root, &s); err == nil || !strings.Contains(err.Error(), "passwrd") {
		t.Fatalf("unknown key: %v", err)
	}
	t.Setenv("CFG_TEST_N", "topsecret-value")
	root, _ = Parse([]byte("n: ${CFG_TEST_N}\n"))
	if err := Decode(root, &s); err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("wrong type: %v", err)
	}
	if _, err := Parse([]byte("n: ${CFG_TEST_SURELY_UNSET}\n")); err == nil || !strings.Contains(err.Error(), "CFG_TEST_SURELY_UNSET") {
		t.Fatalf("unset variable: %v", err)
	}
}
