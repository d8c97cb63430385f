package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// The manifests are decoded strictly (an unknown or misspelt field fails) into the Kubernetes API
// types, then their wiring is checked: what one object names, another must be. With
// SVC_OTELCOL_BIN set (make e2e-test), the config every pod mounts is loaded by `svc-otelcol
// validate` with the pod's environment.

const (
	imageUser     = 10001 // the user of the image (distribution/Dockerfile)
	healthPort    = 13133 // health_check's port in both configs
	otlpGRPCPort  = 4317
	clusterDomain = "svc.cluster.local"
)

// manifests is every object of the directory's YAML files, by kind and name.
type manifests struct {
	namespaces   map[string]*corev1.Namespace
	configMaps   map[string]*corev1.ConfigMap
	services     map[string]*corev1.Service
	statefulSets map[string]*appsv1.StatefulSet
}

func load(t *testing.T) manifests {
	t.Helper()
	m := manifests{namespaces: map[string]*corev1.Namespace{}, configMaps: map[string]*corev1.ConfigMap{},
		services: map[string]*corev1.Service{}, statefulSets: map[string]*appsv1.StatefulSet{}}
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitDocuments(raw) {
			if err := m.add(doc); err != nil {
				t.Errorf("%s, document %d: %v", f, i+1, err)
			}
		}
	}
	return m
}

// splitDocuments splits a YAML stream at its "---" lines, leaving out documents with no content.
func splitDocuments(raw []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), raw...), []byte("\n---\n")) {
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			docs = append(docs, append(d, '\n')) // the line end the separator took
		}
	}
	return docs
}

func stripComments(d []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(d, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(append(out, line...), '\n')
		}
	}
	return out
}

// add decodes one document strictly into the type its apiVersion and kind name.
func (m manifests) add(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	var obj interface {
		GetName() string
		GetNamespace() string
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Namespace":
		obj = &corev1.Namespace{}
	case "v1 ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1 Service":
		obj = &corev1.Service{}
	case "apps/v1 StatefulSet":
		obj = &appsv1.StatefulSet{}
	default:
		return fmt.Errorf("kind %q of %q: not one the test knows (add it)", tm.Kind, tm.APIVersion)
	}
	// As the API server decodes: field names case-sensitive, unknown and duplicate fields refused.
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", tm.Kind, err)
	}
	strict, err := sigsjson.UnmarshalStrict(js, obj, sigsjson.DisallowUnknownFields)
	if err == nil && len(strict) > 0 {
		err = errors.Join(strict...)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", tm.Kind, err)
	}
	if obj.GetName() == "" {
		return fmt.Errorf("%s without a name", tm.Kind)
	}
	switch o := obj.(type) {
	case *corev1.Namespace:
		m.namespaces[o.Name] = o
	case *corev1.ConfigMap:
		m.configMaps[o.Name] = o
	case *corev1.Service:
		m.services[o.Name] = o
	case *appsv1.StatefulSet:
		m.statefulSets[o.Name] = o
	}
	return nil
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	if len(m.namespaces) != 1 {
		t.Fatalf("%d namespaces, want 1", len(m.namespaces))
	}
	for _, want := range []string{"svc-gateway", "svc-router"} {
		if m.statefulSets[want] == nil {
			t.Errorf("no StatefulSet %s", want)
		}
	}
	// A misspelt field fails: the strict decoding is what guards the manifests.
	bad := []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  clusterIp: None\n")
	if err := (manifests{services: map[string]*corev1.Service{}}).add(bad); err == nil || !strings.Contains(err.Error(), "clusterIp") {
		t.Errorf("a misspelt field decoded without error (%v)", err)
	}
}

func TestWiring(t *testing.T) {
	m := load(t)
	var ns string
	for name := range m.namespaces {
		ns = name
	}
	gw, router := m.statefulSets["svc-gateway"], m.statefulSets["svc-router"]
	if gw == nil || router == nil {
		t.Fatal("the gateway and router StatefulSets are missing")
	}

	t.Run("every object in the namespace", func(t *testing.T) {
		for _, o := range m.objects() {
			if o.GetNamespace() != ns {
				t.Errorf("%s: namespace %q, want %q", o.GetName(), o.GetNamespace(), ns)
			}
		}
	})

	for _, sts := range []*appsv1.StatefulSet{gw, router} {
		t.Run(sts.Name, func(t *testing.T) { checkPods(t, m, sts) })
	}

	t.Run("gateway headless service", func(t *testing.T) {
		svc := m.services[gw.Spec.ServiceName]
		if svc == nil {
			t.Fatalf("the gateway StatefulSet's serviceName %q names no Service", gw.Spec.ServiceName)
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("Service %s: clusterIP %q, want None (headless: the DNS resolver needs each pod's address)", svc.Name, svc.Spec.ClusterIP)
		}
		if svc.Spec.PublishNotReadyAddresses {
			t.Errorf("Service %s publishes not-ready pods: a gateway that is down would stay in the routers' ring", svc.Name)
		}
		checkSelects(t, svc, gw)
		checkServicePort(t, svc, gw, "otlp-grpc", otlpGRPCPort)
	})

	t.Run("router service", func(t *testing.T) {
		svc := m.services[router.Spec.ServiceName]
		if svc == nil {
			t.Fatalf("the router StatefulSet's serviceName %q names no Service", router.Spec.ServiceName)
		}
		checkSelects(t, svc, router)
		checkServicePort(t, svc, router, "otlp-grpc", otlpGRPCPort)
		checkServicePort(t, svc, router, "otlp-http", 4318)
	})

	t.Run("gateway configs are the distribution's", func(t *testing.T) {
		for key, file := range map[string]string{
			"config.yaml":  filepath.Join("..", "config.yaml"),
			"gateway.yaml": filepath.Join("..", "examples", "two-tier", "gateway.yaml"),
		} {
			if got := m.configMaps["svc-gateway-config"].Data[key]; got != readFile(t, file) {
				t.Errorf("ConfigMap svc-gateway-config's %s differs from %s: copy the file into it (indented by 4)", key, file)
			}
		}
		if want := []string{"--config", "/etc/svc-otelcol/config.yaml", "--config", "/etc/svc-otelcol/gateway.yaml"}; !slices.Equal(gw.Spec.Template.Spec.Containers[0].Args, want) {
			t.Errorf("gateway args %q, want %q (the default config, then the overlay)", gw.Spec.Template.Spec.Containers[0].Args, want)
		}
	})

	t.Run("router config resolves the gateways", func(t *testing.T) {
		cfg := parseYAML(t, m.configMaps["svc-router-config"].Data["router.yaml"])
		lb := dig(t, cfg, "exporters", "load_balancing")
		if lb["routing_key"] != "traceID" {
			t.Errorf("routing_key %v, want traceID", lb["routing_key"])
		}
		resolver := dig(t, lb, "resolver")
		dns := dig(t, resolver, "dns")
		if len(resolver) != 1 {
			t.Errorf("resolvers %v: want the DNS resolver only", keys(resolver))
		}
		headless := m.services[gw.Spec.ServiceName]
		if want := fmt.Sprintf("%s.%s.%s", headless.Name, headless.Namespace, clusterDomain); dns["hostname"] != want {
			t.Errorf("DNS resolver hostname %v, want the gateways' headless Service %s", dns["hostname"], want)
		}
		if dns["port"] != strconv.Itoa(int(headless.Spec.Ports[0].Port)) {
			t.Errorf("DNS resolver port %v, want the headless Service's %d", dns["port"], headless.Spec.Ports[0].Port)
		}
		for _, p := range dig(t, cfg, "service", "pipelines") {
			if exps := p.(map[string]any)["exporters"]; !reflect.DeepEqual(exps, []any{"load_balancing"}) {
				t.Errorf("a router pipeline exports to %v, want [load_balancing]", exps)
			}
		}
		// Everything else is the example's router config.
		example := parseYAML(t, readFile(t, filepath.Join("..", "examples", "two-tier", "router.yaml")))
		delete(dig(t, example, "exporters", "load_balancing"), "resolver")
		delete(lb, "resolver")
		if !reflect.DeepEqual(cfg, example) {
			t.Error("the router ConfigMap differs from distribution/examples/two-tier/router.yaml in more than the resolver")
		}
	})
}

// checkPods checks a StatefulSet's pod template: the config it mounts and loads, its probes on the
// health check, its storage, its user and resources.
func checkPods(t *testing.T, m manifests, sts *appsv1.StatefulSet) {
	t.Helper()
	pod := sts.Spec.Template
	if !reflect.DeepEqual(sts.Spec.Selector.MatchLabels, selectedLabels(sts.Spec.Selector.MatchLabels, pod.Labels)) {
		t.Errorf("selector %v does not select the pod labels %v", sts.Spec.Selector.MatchLabels, pod.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != imageUser || sc.FSGroup == nil || *sc.FSGroup != imageUser {
		t.Errorf("pod security context %+v: want runAsNonRoot, runAsUser and fsGroup %d (the image's user, who must write the volume)", sc, imageUser)
	}

	// Every --config names a key of a ConfigMap mounted at its directory; the first is the
	// base config, the others overlays.
	var configPaths []string
	for i, a := range c.Args {
		if a == "--config" && i+1 < len(c.Args) {
			configPaths = append(configPaths, c.Args[i+1])
		}
	}
	if len(configPaths) == 0 {
		t.Fatalf("args %q: no --config", c.Args)
	}
	configs := map[string]string{}
	for _, configPath := range configPaths {
		mount, vol := mountOf(t, pod.Spec, c, filepath.Dir(configPath))
		if vol.ConfigMap == nil {
			t.Fatalf("%s is mounted from volume %s, not a ConfigMap", mount.MountPath, vol.Name)
		}
		cm := m.configMaps[vol.ConfigMap.Name]
		if cm == nil {
			t.Fatalf("volume %s: ConfigMap %q does not exist", vol.Name, vol.ConfigMap.Name)
		}
		config, ok := cm.Data[filepath.Base(configPath)]
		if !ok {
			t.Fatalf("ConfigMap %s has no key %s (a --config file)", cm.Name, filepath.Base(configPath))
		}
		configs[configPath] = config
	}
	parsed := parseYAML(t, configs[configPaths[0]])

	// The probes ask the health check extension, on the port the config gives it.
	endpoint, _ := dig(t, parsed, "extensions", "health_check")["endpoint"].(string)
	if !strings.HasSuffix(endpoint, ":"+strconv.Itoa(healthPort)+"}") && !strings.HasSuffix(endpoint, ":"+strconv.Itoa(healthPort)) {
		t.Errorf("health_check endpoint %q: want port %d", endpoint, healthPort)
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", name)
			continue
		}
		if port := containerPort(c, p.HTTPGet.Port); port != healthPort {
			t.Errorf("%s probe on port %v (%d), want the health check's %d", name, p.HTTPGet.Port.String(), port, healthPort)
		}
	}

	// The storage of svc_file_storage is the volume claim, at SVC_STORAGE_DIR.
	storageDir := envValue(c, "SVC_STORAGE_DIR")
	if storageDir == "" {
		t.Fatal("SVC_STORAGE_DIR is not set: svc_file_storage would write to the container's filesystem")
	}
	mount, _ := mountOf(t, pod.Spec, c, storageDir)
	if !slices.ContainsFunc(sts.Spec.VolumeClaimTemplates, func(p corev1.PersistentVolumeClaim) bool { return p.Name == mount.Name }) {
		t.Errorf("%s is mounted from %s, not from a volumeClaimTemplate: the queue would not outlive the pod", storageDir, mount.Name)
	}
	if _, ok := dig(t, parsed, "extensions")["svc_file_storage"]; !ok {
		t.Error("the config has no svc_file_storage extension")
	}
	checkQueueFitsVolume(t, parsed, c, sts.Spec.VolumeClaimTemplates, mount.Name)

	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("no %s request", r)
		}
	}
	if lim, req := c.Resources.Limits[corev1.ResourceMemory], c.Resources.Requests[corev1.ResourceMemory]; lim.Cmp(req) < 0 || lim.Cmp(resource.MustParse("256Mi")) < 0 {
		t.Errorf("memory limit %s: want one (memory_limiter's percentages read it) of at least the request %s and 256Mi", lim.String(), req.String())
	}

	// The config loads with the pod's environment.
	bin := os.Getenv("SVC_OTELCOL_BIN")
	if bin == "" {
		t.Log("SVC_OTELCOL_BIN is not set: the mounted config is not loaded (make e2e-test does)")
		return
	}
	dir := t.TempDir()
	args := []string{"validate"}
	for _, configPath := range configPaths {
		file := filepath.Join(dir, filepath.Base(configPath))
		if err := os.WriteFile(file, []byte(configs[configPath]), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", file)
	}
	env := []string{"SVC_STORAGE_DIR=" + dir}
	for _, e := range c.Env {
		switch {
		case e.Value != "" && e.Name != "SVC_STORAGE_DIR":
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env = append(env, e.Name+"=from-secret-"+e.ValueFrom.SecretKeyRef.Key)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("svc-otelcol validate of the config %s mounts: %v\n%s", sts.Name, err, out)
	}
}

func (m manifests) objects() []interface {
	GetName() string
	GetNamespace() string
} {
	var out []interface {
		GetName() string
		GetNamespace() string
	}
	for _, o := range m.configMaps {
		out = append(out, o)
	}
	for _, o := range m.services {
		out = append(out, o)
	}
	for _, o := range m.statefulSets {
		out = append(out, o)
	}
	return out
}

func checkSelects(t *testing.T, svc *corev1.Service, sts *appsv1.StatefulSet) {
	t.Helper()
	if len(svc.Spec.Selector) == 0 || !reflect.DeepEqual(svc.Spec.Selector, selectedLabels(svc.Spec.Selector, sts.Spec.Template.Labels)) {
		t.Errorf("Service %s selects %v, not the pods of %s (%v)", svc.Name, svc.Spec.Selector, sts.Name, sts.Spec.Template.Labels)
	}
}

// checkServicePort: the Service has the named port at the given number, aimed at the container
// port of the same name, which the config's receiver listens on.
func checkServicePort(t *testing.T, svc *corev1.Service, sts *appsv1.StatefulSet, name string, port int32) {
	t.Helper()
	i := slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == name })
	if i < 0 {
		t.Errorf("Service %s has no port %s", svc.Name, name)
		return
	}
	p := svc.Spec.Ports[i]
	if p.Port != port {
		t.Errorf("Service %s port %s: %d, want %d", svc.Name, name, p.Port, port)
	}
	if got := containerPort(sts.Spec.Template.Spec.Containers[0], p.TargetPort); got != port {
		t.Errorf("Service %s port %s aims at container port %d, want %d (the OTLP receiver's)", svc.Name, name, got, port)
	}
}

// selectedLabels is the subset of labels that selector names.
func selectedLabels(selector, labels map[string]string) map[string]string {
	out := map[string]string{}
	for k := range selector {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

// containerPort resolves a port by number or by the name of a container port.
func containerPort(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return 0
}

// mountOf is the container's volume mount at path and its volume.
func mountOf(t *testing.T, pod corev1.PodSpec, c corev1.Container, path string) (corev1.VolumeMount, corev1.Volume) {
	t.Helper()
	i := slices.IndexFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return filepath.Clean(vm.MountPath) == filepath.Clean(path) })
	if i < 0 {
		t.Fatalf("nothing is mounted at %s", path)
	}
	vm := c.VolumeMounts[i]
	j := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
	if j < 0 {
		return vm, corev1.Volume{Name: vm.Name}
	}
	return vm, pod.Volumes[j]
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func parseYAML(t *testing.T, s string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := yaml.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("config: %v", err)
	}
	return out
}

// dig walks nested maps by keys, failing the test when one is missing.
func dig(t *testing.T, m map[string]any, path ...string) map[string]any {
	t.Helper()
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			t.Fatalf("config: no map at %s (in %v)", k, keys(m))
		}
		m = next
	}
	return m
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
