package buildinfo

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tributary-dev/tributary/mirror"
)

// The parts of the Kubernetes objects packaging/kubernetes uses, with the API's field names:
// the file is decoded strictly into them, so a misspelt or misplaced field fails the test.
type (
	k8sMeta struct {
		Name        string            `yaml:"name"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	}
	k8sSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	k8sConfigMap struct {
		APIVersion string            `yaml:"apiVersion"`
		Kind       string            `yaml:"kind"`
		Metadata   k8sMeta           `yaml:"metadata"`
		Data       map[string]string `yaml:"data"`
	}
	k8sPDB struct {
		APIVersion string  `yaml:"apiVersion"`
		Kind       string  `yaml:"kind"`
		Metadata   k8sMeta `yaml:"metadata"`
		Spec       struct {
			MinAvailable int         `yaml:"minAvailable"`
			Selector     k8sSelector `yaml:"selector"`
		} `yaml:"spec"`
	}
	k8sProbe struct {
		HTTPGet struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"`
		} `yaml:"httpGet"`
		InitialDelaySeconds int `yaml:"initialDelaySeconds"`
		PeriodSeconds       int `yaml:"periodSeconds"`
		TimeoutSeconds      int `yaml:"timeoutSeconds"`
		FailureThreshold    int `yaml:"failureThreshold"`
	}
	k8sContainer struct {
		Name  string   `yaml:"name"`
		Image string   `yaml:"image"`
		Args  []string `yaml:"args"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env []struct {
			Name      string `yaml:"name"`
			ValueFrom struct {
				SecretKeyRef struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
		LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
	}
	k8sDeployment struct {
		APIVersion string  `yaml:"apiVersion"`
		Kind       string  `yaml:"kind"`
		Metadata   k8sMeta `yaml:"metadata"`
		Spec       struct {
			Replicas int         `yaml:"replicas"`
			Selector k8sSelector `yaml:"selector"`
			Strategy struct {
				Type          string `yaml:"type"`
				RollingUpdate struct {
					MaxSurge       int `yaml:"maxSurge"`
					MaxUnavailable int `yaml:"maxUnavailable"`
				} `yaml:"rollingUpdate"`
			} `yaml:"strategy"`
			Template struct {
				Metadata k8sMeta `yaml:"metadata"`
				Spec     struct {
					TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
					Affinity                      struct {
						PodAntiAffinity struct {
							Preferred []struct {
								Weight          int `yaml:"weight"`
								PodAffinityTerm struct {
									TopologyKey   string      `yaml:"topologyKey"`
									LabelSelector k8sSelector `yaml:"labelSelector"`
								} `yaml:"podAffinityTerm"`
							} `yaml:"preferredDuringSchedulingIgnoredDuringExecution"`
						} `yaml:"podAntiAffinity"`
					} `yaml:"affinity"`
					SecurityContext struct {
						RunAsNonRoot   bool `yaml:"runAsNonRoot"`
						RunAsUser      int  `yaml:"runAsUser"`
						RunAsGroup     int  `yaml:"runAsGroup"`
						FSGroup        int  `yaml:"fsGroup"`
						SeccompProfile struct {
							Type string `yaml:"type"`
						} `yaml:"seccompProfile"`
					} `yaml:"securityContext"`
					Containers []k8sContainer `yaml:"containers"`
					Volumes    []struct {
						Name      string `yaml:"name"`
						ConfigMap *struct {
							Name  string `yaml:"name"`
							Items []struct {
								Key  string `yaml:"key"`
								Path string `yaml:"path"`
							} `yaml:"items"`
						} `yaml:"configMap"`
						EmptyDir *struct{} `yaml:"emptyDir"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
)

// strict decodes one YAML document into v, refusing fields v does not have.
func strict(doc []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	return dec.Decode(v)
}

var (
	muxRouteRE = regexp.MustCompile(`mux\.Handle(?:Func)?\("GET (/[^"{]*)"`)
	envRefRE   = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// TestPackagingKubernetes checks packaging/kubernetes/cdcmirror-ha.yaml without a cluster: its
// objects decode strictly into the API's fields; the configuration in the ConfigMap is accepted
// by cdcmirror's parser, with a shared state store (active/standby), every ${VAR} it names set
// from a Secret, the file the container's --config names and its dlq on a writable volume; the
// Deployment runs two replicas that the PodDisruptionBudget and the anti-affinity select; the
// probes ask endpoints cdcmirror serves (examples/cdcmirror/http.go), on the port --metrics-addr
// binds, readiness on /healthz (a standby is healthy).
func TestPackagingKubernetes(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "packaging", "kubernetes", "cdcmirror-ha.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var (
		cms  []k8sConfigMap
		deps []k8sDeployment
		pdbs []k8sPDB
	)
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		doc, err := yaml.Marshal(&n)
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
		}
		if err := n.Decode(&head); err != nil {
			t.Fatal(err)
		}
		switch head.APIVersion + " " + head.Kind {
		case "v1 ConfigMap":
			var o k8sConfigMap
			err = strict(doc, &o)
			cms = append(cms, o)
		case "apps/v1 Deployment":
			var o k8sDeployment
			err = strict(doc, &o)
			deps = append(deps, o)
		case "policy/v1 PodDisruptionBudget":
			var o k8sPDB
			err = strict(doc, &o)
			pdbs = append(pdbs, o)
		default:
			t.Fatalf("%s: an object of %s %s, which this test does not know", file, head.APIVersion, head.Kind)
		}
		if err != nil {
			t.Fatalf("%s: %s: %v", file, head.Kind, err)
		}
	}
	if len(cms) != 1 || len(deps) != 1 || len(pdbs) != 1 {
		t.Fatalf("%s: %d ConfigMaps, %d Deployments, %d PodDisruptionBudgets; want one of each", file, len(cms), len(deps), len(pdbs))
	}
	d, cm, pdb := deps[0], cms[0], pdbs[0]
	spec := d.Spec.Template.Spec
	labels := d.Spec.Template.Metadata.Labels
	selects := func(what string, sel k8sSelector) {
		if len(sel.MatchLabels) == 0 {
			t.Errorf("%s: %s selects nothing", file, what)
		}
		for k, v := range sel.MatchLabels {
			if labels[k] != v {
				t.Errorf("%s: %s's label %s=%s is not on the pods", file, what, k, v)
			}
		}
	}
	if d.Spec.Replicas != 2 {
		t.Errorf("%s: replicas %d, want 2 (active and standby)", file, d.Spec.Replicas)
	}
	selects("the Deployment's selector", d.Spec.Selector)
	selects("the PodDisruptionBudget", pdb.Spec.Selector)
	if pdb.Spec.MinAvailable != 1 {
		t.Errorf("%s: the PodDisruptionBudget keeps %d available, want 1", file, pdb.Spec.MinAvailable)
	}
	for _, p := range spec.Affinity.PodAntiAffinity.Preferred {
		selects("the anti-affinity", p.PodAffinityTerm.LabelSelector)
	}
	if !spec.SecurityContext.RunAsNonRoot || spec.SecurityContext.RunAsUser != 65532 {
		t.Errorf("%s: the pods must run as the image's non-root user 65532", file)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", file, len(spec.Containers))
	}
	c := spec.Containers[0]

	// The flags: --config names the ConfigMap's file where it is mounted; --metrics-addr binds
	// every interface (the kubelet's probes) on the container's port.
	flag := func(name string) string {
		i := slices.Index(c.Args, name)
		if i < 0 || i+1 >= len(c.Args) || c.Args[0] != "run" {
			t.Fatalf("%s: the container's args must be run ... %s VALUE: %q", file, name, c.Args)
		}
		return c.Args[i+1]
	}
	cfgPath, addr := flag("--config"), flag("--metrics-addr")
	mounts := map[string]string{} // volume name -> mount path
	readOnly := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name], readOnly[m.Name] = m.MountPath, m.ReadOnly
	}
	var cfgText string
	writable := []string{}
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil && v.ConfigMap.Name == cm.Metadata.Name:
			for _, it := range v.ConfigMap.Items {
				if path.Join(mounts[v.Name], it.Path) == cfgPath {
					cfgText = cm.Data[it.Key]
				}
			}
		case v.EmptyDir != nil && mounts[v.Name] != "" && !readOnly[v.Name]:
			writable = append(writable, mounts[v.Name])
		}
	}
	if cfgText == "" {
		t.Fatalf("%s: --config %s is not a key of the ConfigMap %s mounted there", file, cfgPath, cm.Metadata.Name)
	}
	host, port, ok := strings.Cut(addr, ":")
	if !ok || host != "0.0.0.0" {
		t.Errorf("%s: --metrics-addr %s: the probes need it on every interface (0.0.0.0:PORT)", file, addr)
	}
	ports := map[string]string{}
	for _, p := range c.Ports {
		ports[p.Name] = strconv.Itoa(p.ContainerPort)
	}

	// The probes: endpoints cdcmirror serves, on the port it listens on.
	src, err := os.ReadFile(filepath.Join(root, "examples", "cdcmirror", "http.go"))
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for _, m := range muxRouteRE.FindAllStringSubmatch(string(src), -1) {
		served[m[1]] = true
	}
	if !served["/healthz"] || !served["/status"] {
		t.Fatalf("examples/cdcmirror/http.go: GET routes %v, want /healthz and /status among them", slices.Sorted(maps.Keys(served)))
	}
	for name, p := range map[string]*k8sProbe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		if p == nil {
			t.Errorf("%s: no %s", file, name)
			continue
		}
		if !served[p.HTTPGet.Path] {
			t.Errorf("%s: %s asks %s, which cdcmirror does not serve (GET %v)", file, name, p.HTTPGet.Path, slices.Sorted(maps.Keys(served)))
		}
		got := p.HTTPGet.Port
		if named, ok := ports[got]; ok {
			got = named
		}
		if got != port {
			t.Errorf("%s: %s asks port %s; cdcmirror listens on %s", file, name, p.HTTPGet.Port, port)
		}
	}
	if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("%s: readiness asks %s, want /healthz (healthy pipelines; a standby is healthy)", file, c.ReadinessProbe.HTTPGet.Path)
	}
	if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet.Path == "/healthz" {
		t.Errorf("%s: liveness on /healthz would restart a pod for an unhealthy pipeline (a source or cluster down), which a restart does not cure", file)
	}

	// The configuration: every ${VAR} comes from the container's environment (a Secret), and
	// cdcmirror's parser accepts it with a shared state store.
	env := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom.SecretKeyRef.Name == "" || e.ValueFrom.SecretKeyRef.Key == "" {
			t.Errorf("%s: env %s does not come from a Secret", file, e.Name)
		}
		env[e.Name] = true
	}
	for _, m := range envRefRE.FindAllStringSubmatch(cfgText, -1) {
		if !env[m[1]] {
			t.Errorf("%s: the configuration names ${%s}, which the container's env does not set", file, m[1])
		}
		t.Setenv(m[1], "k8s-"+strings.ToLower(m[1]))
	}
	cfg, err := mirror.ParseConfig([]byte(cfgText))
	if err != nil {
		t.Fatalf("%s: the ConfigMap's cdcmirror.yaml: %v", file, err)
	}
	if cfg.StateStore == nil || cfg.State != "" {
		t.Errorf("%s: the configuration must keep its state in a shared store (state_store:), not a file", file)
	}
	for _, p := range cfg.Pipelines {
		if !slices.ContainsFunc(writable, func(dir string) bool { return strings.HasPrefix(p.DLQ, dir+"/") }) {
			t.Errorf("%s: pipeline %s's dlq %s is not on a writable volume of the pod (%v)", file, p.Name, p.DLQ, writable)
		}
	}
}
