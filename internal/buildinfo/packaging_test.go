package buildinfo

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestPackaging checks packaging/ as far as a machine without a container daemon allows: each
// Dockerfile is multi-stage, ends on a static non-root image that runs the binary its build
// stage made, and that build command (run here as written, stage paths mapped to a temporary
// directory) produces a static, stamped binary; each systemd unit passes `systemd-analyze
// verify` with that binary in ExecStart's place, and its RestartPreventExitStatus is the exit
// status the binary gives a configuration it refuses.
func TestPackaging(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries: not in -short")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is needed to verify packaging/systemd (Debian: apt-get install systemd): %v", err)
	}
	for _, program := range []string{"cdcmirror", "recordsvc"} {
		t.Run(program, func(t *testing.T) {
			bin := checkDockerfile(t, root, program)
			checkUnit(t, root, analyze, program, bin)
		})
	}
}

// checkDockerfile checks packaging/docker/<program>.Dockerfile and returns the binary its build
// command made.
func checkDockerfile(t *testing.T, root, program string) string {
	path := filepath.Join(root, "packaging", "docker", program+".Dockerfile")
	lines := dockerLines(t, path)
	var froms []int
	for i, l := range lines {
		if strings.HasPrefix(l, "FROM ") {
			froms = append(froms, i)
		}
	}
	if len(froms) < 2 {
		t.Fatalf("%s: %d FROM lines, want a multi-stage build", path, len(froms))
	}
	final := lines[froms[len(froms)-1]:]
	if base := strings.Fields(final[0])[1]; !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
		t.Errorf("%s: final image %s, want distroless/static or scratch (no shell, no libc)", path, base)
	}
	var user, entry string
	copied := false
	for _, l := range final {
		switch {
		case strings.HasPrefix(l, "USER "):
			user = strings.TrimSpace(strings.TrimPrefix(l, "USER "))
		case strings.HasPrefix(l, "ENTRYPOINT "):
			entry = l
		case strings.HasPrefix(l, "COPY --from=build /out/"+program+" /usr/local/bin/"+program):
			copied = true
		}
	}
	if uid, err := strconv.Atoi(strings.Split(user, ":")[0]); err != nil || uid == 0 {
		t.Errorf("%s: USER %q in the final stage, want a numeric non-root uid", path, user)
	}
	if !copied || entry != `ENTRYPOINT ["/usr/local/bin/`+program+`"]` {
		t.Errorf("%s: the final stage must copy /out/%s from the build stage and run it (ENTRYPOINT %q)", path, program, entry)
	}
	var build string
	for _, l := range lines[:froms[len(froms)-1]] {
		if strings.HasPrefix(l, "RUN ") && strings.Contains(l, " build ") {
			build = strings.TrimPrefix(l, "RUN ")
		}
	}
	if build == "" || !strings.Contains(build, "CGO_ENABLED=0") {
		t.Fatalf("%s: no static (CGO_ENABLED=0) go build in the build stage", path)
	}
	out := t.TempDir()
	build = strings.NewReplacer("${VERSION}", "v0.0.0-packagingtest", "${COMMIT}", "0123456789abcdef", "/out/", out+"/").Replace(build)
	cmd := exec.Command("sh", "-c", build)
	cmd.Dir = root // the Dockerfile's WORKDIR holds the whole repository
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s's build command: %v\n%s", path, err, o)
	}
	bin := filepath.Join(out, program)
	o, err := exec.Command(bin, "--version").CombinedOutput()
	if got := string(o); err != nil || !strings.HasPrefix(got, program+" v0.0.0-packagingtest (commit 0123456789ab") {
		t.Errorf("%s --version: %q (%v), want the version and commit the build stamped", bin, got, err)
	}
	return bin
}

// dockerLines returns the Dockerfile's instructions, continuation lines joined, comments dropped.
func dockerLines(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasSuffix(l, `\`) {
			cur.WriteString(strings.TrimSuffix(l, `\`) + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

var execStart = regexp.MustCompile(`(?m)^ExecStart=(\S+)`)

// checkUnit verifies packaging/systemd/<program>.service with bin as its executable.
func checkUnit(t *testing.T, root, analyze, program, bin string) {
	path := filepath.Join(root, "packaging", "systemd", program+".service")
	unit, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := execStart.FindSubmatch(unit)
	if m == nil || string(m[1]) != "/usr/local/bin/"+program {
		t.Fatalf("%s: ExecStart must run /usr/local/bin/%s", path, program)
	}
	dir := t.TempDir()
	test := filepath.Join(dir, program+".service")
	if err := os.WriteFile(test, []byte(strings.Replace(string(unit), "ExecStart=/usr/local/bin/"+program, "ExecStart="+bin, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := exec.Command(analyze, "verify", "--man=no", test).CombinedOutput()
	if err != nil || strings.TrimSpace(string(o)) != "" {
		t.Errorf("systemd-analyze verify %s: %v\n%s", path, err, o)
	}
	if !strings.Contains(string(unit), "\nRestartPreventExitStatus=2\n") {
		t.Fatalf("%s: RestartPreventExitStatus=2 expected (the exit status of a refused configuration)", path)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("no_such_key: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", bad}
	if program == "cdcmirror" {
		args = append([]string{"run"}, args...)
	}
	var exit *exec.ExitError
	if err := exec.Command(bin, args...).Run(); !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Errorf("%s with an unknown configuration key: %v, want exit status 2 (RestartPreventExitStatus)", program, err)
	}
}
