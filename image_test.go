package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"petstore/internal/testkit"
)

// The container image (Containerfile, deploy/image.sh; docs/production.md,
// "In a container"): built as CI builds it, for amd64 and arm64, then run
// from its own filesystem as user 65532. PETSTORE_TEST_IMAGE=1 runs it
// (.ci/run does, once, outside the race run); it needs podman or docker,
// and root for chroot.
func TestContainerImage(t *testing.T) {
	engine := imageEngine(t)
	tag := fmt.Sprintf("imagetest-%d", os.Getpid())
	arches := []string{runtime.GOARCH, "arm64"}
	if runtime.GOARCH == "arm64" {
		arches[1] = "amd64"
	}
	build := exec.Command("deploy/image.sh", tag)
	build.Env = append(os.Environ(), "ARCHES="+strings.Join(arches, " "), "PETSTORE_IMAGE_ENGINE="+engine)
	t.Cleanup(func() {
		exec.Command(engine, "manifest", "rm", "petstore:"+tag).Run()
		for _, arch := range arches {
			exec.Command(engine, "rmi", "petstore:"+tag+"-"+arch).Run()
		}
	})
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("deploy/image.sh %s: %v\n%s", tag, err, out)
	}
	var img savedImage
	for i, arch := range arches {
		saved := saveImage(t, engine, "petstore:"+tag+"-"+arch)
		checkImageBinary(t, saved, arch)
		if i == 0 {
			img = saved
		}
	}
	t.Run("the image is configured to run as 65532 on /data with a health check", func(t *testing.T) {
		checkImageConfig(t, img)
	})
	t.Run("its CA roots are this machine's, and nothing else is in it", func(t *testing.T) {
		checkImageFiles(t, img)
	})
	r := newImageRunner(t, engine, "petstore:"+tag+"-"+arches[0], img)
	t.Run("it serves as 65532 and keeps its data across a restart", func(t *testing.T) {
		checkImageServes(t, r)
	})
	t.Run("a TLS client in it trusts the image's roots and no others", func(t *testing.T) {
		checkImageTrustsItsRoots(t, r)
	})
	t.Run("a /data it cannot write is refused in one line, exit status 1", func(t *testing.T) {
		checkImageRefusesReadOnlyData(t, r)
	})
}

// imageEngine is podman, or docker where podman is missing. Without
// PETSTORE_TEST_IMAGE=1 the test is skipped: it adds images to the
// machine's container storage and takes minutes.
func imageEngine(t *testing.T) string {
	if testkit.RaceDetector {
		t.Skip("builds and runs the container image: not again under the race detector (.ci/run runs it once, outside)")
	}
	if os.Getenv("PETSTORE_TEST_IMAGE") != "1" {
		t.Skip("builds the container image with podman or docker and runs it as root with chroot; PETSTORE_TEST_IMAGE=1 runs it (.ci/run does)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("PETSTORE_TEST_IMAGE=1 and not root: the image's filesystem is run with chroot as user 65532, which needs root")
	}
	for _, engine := range []string{"podman", "docker"} {
		if _, err := exec.LookPath(engine); err == nil {
			return engine
		}
	}
	t.Fatal("PETSTORE_TEST_IMAGE=1 and neither podman nor docker on PATH: install podman (apt-get install podman)")
	return ""
}

// checkImageBinary: the image is for arch, its binary a static one for
// arch, and the image at most 25 MB, or the binary plus 2 MB where the
// binary alone passes 23 MB.
func checkImageBinary(t *testing.T, img savedImage, arch string) {
	t.Helper()
	if img.config.Architecture != arch {
		t.Errorf("the %s image says its architecture is %q", arch, img.config.Architecture)
	}
	bin := filepath.Join(img.rootfs, "petstore")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("the %s image's /petstore: %v", arch, err)
	}
	defer f.Close()
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != machine {
		t.Errorf("the %s image's /petstore is for %v, want %v", arch, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the %s image's /petstore is dynamically linked: it asks for an interpreter, which the image has not", arch)
		}
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	limit := max(25<<20, fi.Size()+2<<20)
	t.Logf("linux/%s: the image is %.1f MB, its binary %.1f MB (limit %.1f MB)", arch, mb(img.size), mb(fi.Size()), mb(limit))
	if img.size > limit {
		t.Errorf("the %s image is %.1f MB, over %.1f MB", arch, mb(img.size), mb(limit))
	}
}

func mb(n int64) float64 { return float64(n) / 1e6 }

// checkImageConfig: what the Containerfile promises, and labels that say
// what the binary says of itself.
func checkImageConfig(t *testing.T, img savedImage) {
	c := img.config.Config
	for _, tt := range []struct{ what, got, want string }{
		{"USER", c.User, "65532:65532"},
		{"WORKDIR", c.WorkingDir, "/data"},
		{"ENTRYPOINT", strings.Join(c.Entrypoint, " "), "/petstore"},
		{"CMD", strings.Join(c.Cmd, " "), "serve"},
		{"PETSTORE_ADDR", envValue(c.Env, "PETSTORE_ADDR"), ":8080"},
	} {
		if tt.got != tt.want {
			t.Errorf("the image's %s is %q, want %q", tt.what, tt.got, tt.want)
		}
	}
	if _, ok := c.Volumes["/data"]; !ok {
		t.Errorf("the image's volumes are %v, want /data", c.Volumes)
	}
	if c.Healthcheck == nil || !slices.Equal(c.Healthcheck.Test, []string{"CMD", "/petstore", "healthcheck"}) {
		t.Fatalf("the image's HEALTHCHECK is %+v, want the exec form of /petstore healthcheck (podman build --format docker keeps it)", c.Healthcheck)
	}
	info, err := buildinfo.ReadFile(filepath.Join(img.rootfs, "petstore"))
	if err != nil {
		t.Fatal(err)
	}
	revision, dirty := "unknown", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			revision = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	for label, want := range map[string]string{"version": info.Main.Version, "revision": revision + dirty} {
		if got := c.Labels["org.opencontainers.image."+label]; got != want {
			t.Errorf("label org.opencontainers.image.%s is %q, but the binary says %q", label, got, want)
		}
	}
	if _, ok := c.Labels["org.opencontainers.image.source"]; !ok {
		t.Errorf("no org.opencontainers.image.source label among %v", c.Labels)
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err == nil && revision != "unknown" && revision != strings.TrimSpace(string(head)) {
		t.Errorf("the image's binary was built from %s, not from this checkout's HEAD %s", revision, head)
	}
}

func envValue(env []string, name string) string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, name+"="); ok {
			return v
		}
	}
	return ""
}

// checkImageFiles: the binary, the CA roots and /data, owned by 65532;
// no /etc/passwd or /etc/hosts for anything to depend on.
func checkImageFiles(t *testing.T, img savedImage) {
	var files []string
	filepath.WalkDir(img.rootfs, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(img.rootfs, path)
			files = append(files, "/"+rel)
		}
		return err
	})
	if want := []string{"/etc/ssl/certs/ca-certificates.crt", "/petstore"}; !slices.Equal(files, want) {
		t.Errorf("the image holds %q, want only %q", files, want)
	}
	fi, err := os.Stat(filepath.Join(img.rootfs, "data"))
	if err != nil {
		t.Fatalf("the image has no /data: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || st.Uid != imageUser || fi.Mode().Perm()&0o700 != 0o700 {
		t.Errorf("the image's /data is %v owned by uid %d, want a directory 65532 can write", fi.Mode(), st.Uid)
	}
	image := pemCertificates(t, filepath.Join(img.rootfs, "etc/ssl/certs/ca-certificates.crt"))
	system := pemCertificates(t, "/etc/ssl/certs/ca-certificates.crt")
	if len(image) < 100 {
		t.Errorf("the image's CA bundle holds %d certificates: not a system's roots", len(image))
	}
	for _, c := range system {
		if !slices.ContainsFunc(image, c.Equal) {
			t.Errorf("the image's CA bundle lacks this machine's root %q", c.Subject)
		}
	}
}

// pemCertificates parses every block of the PEM file, all certificates.
func pemCertificates(t *testing.T, name string) []*x509.Certificate {
	t.Helper()
	rest, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if block.Type != "CERTIFICATE" || err != nil {
			t.Fatalf("%s: a %s block that is not a certificate: %v", name, block.Type, err)
		}
		certs = append(certs, c)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		t.Errorf("%s ends in %d bytes that are not PEM", name, len(rest))
	}
	return certs
}

// checkImageServes: a first start writes the first key into /data, the
// API answers it, and a pet made before a restart is there after it. A
// command's events name the user by uid, with no /etc/passwd.
func checkImageServes(t *testing.T, r *imageRunner) {
	addr := freeLoopbackAddr(t)
	s := r.startServer(t, addr)
	keyFile := filepath.Join(r.data, "petstore.db.bootstrap-key")
	raw, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatalf("no first key in /data: %v\nserver:\n%s", err, s.stderr())
	}
	if fi, _ := os.Stat(keyFile); fi.Sys().(*syscall.Stat_t).Uid != imageUser || fi.Mode().Perm() != 0o600 {
		t.Errorf("/data/petstore.db.bootstrap-key is %v, uid %d; want 0600, 65532's", fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
	}
	// The image's PETSTORE_ADDR listens on every interface, :8080: its
	// health check then asks 127.0.0.1, with no /etc/hosts for localhost.
	_, port, _ := strings.Cut(addr, ":")
	if code, out := r.run(t, []string{"PETSTORE_ADDR=:" + port}, r.img.config.Config.Healthcheck.Test[1:]...); code != 0 {
		t.Errorf("the health check given PETSTORE_ADDR=:%s: exit %d: %s", port, code, out)
	}
	key := strings.TrimSpace(string(raw))
	client := &http.Client{Timeout: 10 * time.Second}
	resp, body := testkit.Fetch(t, client, "POST", "http://"+addr+"/v1/pets", key, `{"name":"Boxed","categoryId":1}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create a pet: %d %s", resp.StatusCode, body)
	}
	pet := testkit.ReadPet(t, []byte(body))
	s.stop()

	s = r.startServer(t, addr)
	resp, body = testkit.Fetch(t, client, "GET", fmt.Sprintf("http://%s/v1/pets/%d", addr, pet.ID), key, "")
	if resp.StatusCode != http.StatusOK || testkit.ReadPet(t, []byte(body)).Name != "Boxed" {
		t.Errorf("after a restart, pet %d: %d %s; want it, with the first key still good", pet.ID, resp.StatusCode, body)
	}
	s.stop()

	if code, out := r.run(t, nil, "/petstore", "keys", "create", "--plan", "pro", "--name", "in-the-image"); code != 0 {
		t.Fatalf("keys create in the image: exit %d: %s", code, out)
	}
	code, out := r.run(t, nil, "/petstore", "audit", "--action", "key.created", "--json")
	var events []struct {
		Actor   string
		Details struct{ Name string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &events) != nil {
		t.Fatalf("audit in the image: exit %d: %s", code, out)
	}
	i := slices.IndexFunc(events, func(e struct {
		Actor   string
		Details struct{ Name string }
	}) bool {
		return e.Details.Name == "in-the-image"
	})
	if i < 0 {
		t.Fatalf("the audit trail has no key.created of in-the-image: %s", out)
	}
	if actor := events[i].Actor; !strings.HasPrefix(actor, "uid=65532@") || strings.Contains(actor, "unknown") {
		t.Errorf("a command in the image is audited as %q, want uid=65532@ its host", actor)
	}
}

// checkImageTrustsItsRoots: petstore healthcheck in the image, a TLS
// client reading the system's roots where Go looks for them (no
// SSL_CERT_FILE), refuses a local test server whose root is not in the
// image's bundle, then trusts it once the root is added there.
func checkImageTrustsItsRoots(t *testing.T, r *imageRunner) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	srv.StartTLS()
	defer srv.Close()
	code, out := r.run(t, nil, "/petstore", "healthcheck", "--url", srv.URL)
	if code != 1 || !strings.Contains(out, "certificate signed by unknown authority") {
		t.Errorf("a server whose root the image lacks: exit %d: %s; want 1, unknown authority", code, out)
	}
	f, err := os.OpenFile(r.roots, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		t.Fatal(err)
	}
	if code, out := r.run(t, nil, "/petstore", "healthcheck", "--url", srv.URL); code != 0 {
		t.Errorf("a server whose root is in the image's bundle: exit %d: %s; want 0", code, out)
	}
}

// checkImageRefusesReadOnlyData: a /data on a read-only file system, and
// one its user cannot write, each stop the server at start in one line
// that says what to do, exit status 1, the data already there untouched.
func checkImageRefusesReadOnlyData(t *testing.T, r *imageRunner) {
	db := filepath.Join(r.data, "petstore.db")
	before := fileSum(t, db)
	c := r.img.config.Config
	argv := append(append([]string{}, c.Entrypoint...), c.Cmd...)
	env := []string{"PETSTORE_ADDR=" + freeLoopbackAddr(t)}
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T) (undo func())
		want  string
	}{
		{"a read-only volume", r.readOnlyData, "petstore: cannot write to /data: it is on a read-only file system"},
		{"a volume owned by root", func(t *testing.T) func() {
			chownData(t, r.data, 0, 0o755)
			return func() { chownData(t, r.data, imageUser, 0o700) }
		}, "petstore: cannot write to /data as uid 65532 (owned by uid 0, drwxr-xr-x)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			undo := tt.setup(t)
			code, out := r.run(t, env, argv...)
			undo()
			if code != 1 || !strings.Contains(out, tt.want) || !strings.Contains(out, "volume") {
				t.Errorf("exit %d: %s\nwant 1 and %q, saying what to do with the volume", code, out, tt.want)
			}
			if r.engine == "" && strings.Count(strings.TrimSpace(out), "\n") > 0 {
				t.Errorf("more than one line: %s", out)
			}
		})
	}
	if fileSum(t, db) != before {
		t.Error("petstore.db changed when the server was refused")
	}
}

// readOnlyData makes /data read-only with its data in it: a read-only bind
// mount of it on itself, or podman run's :ro.
func (r *imageRunner) readOnlyData(t *testing.T) func() {
	if r.engine != "" {
		r.dataRO = true
		return func() { r.dataRO = false }
	}
	if err := syscall.Mount(r.data, r.data, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mount /data: %v", err)
	}
	if err := syscall.Mount("", r.data, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		syscall.Unmount(r.data, 0)
		t.Fatalf("make /data read-only: %v", err)
	}
	return func() {
		if err := syscall.Unmount(r.data, 0); err != nil {
			t.Errorf("unmount %s: %v", r.data, err)
		}
	}
}

func chownData(t *testing.T, dir string, uid int, mode os.FileMode) {
	t.Helper()
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func fileSum(t *testing.T, name string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
