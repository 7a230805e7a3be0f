package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// imageUser is the user the image runs as (the Containerfile's USER).
const imageUser = 65532

// imageRunner runs commands in the image as a container engine would:
// with podman run where this machine can run containers, else in the
// image's unpacked filesystem with chroot, as user 65532, /data being the
// unpacked image's own /data (the volume, which the test owns).
type imageRunner struct {
	engine string // podman or docker when it runs containers; "" for chroot
	ref    string
	img    savedImage
	data   string // the directory the image sees as /data
	roots  string // the file the image sees as /etc/ssl/certs/ca-certificates.crt
	dataRO bool   // podman run mounts /data read-only
}

// newImageRunner picks how to run the image: podman run when it can run
// one (here, with the host's network, as the chroot shares it), else
// chroot.
func newImageRunner(t *testing.T, engine, ref string, img savedImage) *imageRunner {
	t.Helper()
	r := &imageRunner{ref: ref, img: img,
		data:  filepath.Join(img.rootfs, "data"),
		roots: filepath.Join(img.rootfs, "etc/ssl/certs/ca-certificates.crt")}
	probe := exec.Command(engine, "run", "--rm", "--no-healthcheck", "--network", "host", ref, "version")
	out, err := probe.CombinedOutput()
	if err != nil {
		t.Logf("%s run cannot run the image here (%v: %s): running its filesystem with chroot", engine, err, firstLine(string(out)))
		return r
	}
	t.Logf("%s run runs the image here", engine)
	r.engine = engine
	r.data = t.TempDir()
	if err := os.Chown(r.data, imageUser, imageUser); err != nil {
		t.Fatal(err)
	}
	roots := filepath.Join(t.TempDir(), "ca-certificates.crt")
	b, err := os.ReadFile(r.roots)
	if err == nil {
		err = os.WriteFile(roots, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	r.roots = roots
	return r
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// command runs argv (its first word a path in the image) with the image's
// environment and env added, its standard error going to stderr.
func (r *imageRunner) command(ctx context.Context, stderr *os.File, env []string, argv ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if r.engine != "" {
		// The test runs the image's health check itself.
		args := []string{"run", "--rm", "--no-healthcheck", "--network", "host", "--user", "65532:65532",
			"-v", r.data + ":/data" + map[bool]string{true: ":ro"}[r.dataRO],
			"-v", r.roots + ":/etc/ssl/certs/ca-certificates.crt:ro", "--entrypoint", argv[0]}
		for _, e := range env {
			args = append(args, "-e", e)
		}
		args = append(append(args, r.ref), argv[1:]...)
		cmd = exec.CommandContext(ctx, r.engine, args...)
	} else {
		// Nothing of this process's environment: the image's, and env.
		// argv[0] is a path in the image: exec runs it after the chroot.
		cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = r.img.config.Config.WorkingDir
		cmd.Env = append(append([]string{}, r.img.config.Config.Env...), env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: r.img.rootfs,
			Credential: &syscall.Credential{Uid: imageUser, Gid: imageUser, Groups: []uint32{}}}
	}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	return cmd
}

// run runs argv to its end and returns its exit status and output.
func (r *imageRunner) run(t *testing.T, env []string, argv ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := r.command(ctx, out, env, argv...)
	err = cmd.Run()
	b, _ := os.ReadFile(out.Name())
	if cmd.ProcessState == nil {
		t.Fatalf("run %q in the image: %v", argv, err)
	}
	return cmd.ProcessState.ExitCode(), string(b)
}

// imageServer is the image's entrypoint serving on a port of loopback.
type imageServer struct {
	t    *testing.T
	r    *imageRunner
	env  []string
	cmd  *exec.Cmd
	logs string // the file of its standard error
	done chan struct{}
}

// startImageServer starts the image's entrypoint and command, listening on
// addr, and waits until the image's HEALTHCHECK passes.
func (r *imageRunner) startServer(t *testing.T, addr string) *imageServer {
	t.Helper()
	c := r.img.config.Config
	s := &imageServer{t: t, r: r, env: []string{"PETSTORE_ADDR=" + addr}, done: make(chan struct{})}
	logs, err := os.CreateTemp(t.TempDir(), "server")
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	s.logs = logs.Name()
	s.cmd = r.command(context.Background(), logs, s.env, append(append([]string{}, c.Entrypoint...), c.Cmd...)...)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start the image's entrypoint: %v", err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, out := r.run(t, s.env, c.Healthcheck.Test[1:]...)
		if code == 0 {
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("the server in the image stopped, %v:\n%s", s.cmd.ProcessState, s.stderr())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the image's health check still fails after 30s: %s\nserver:\n%s", out, s.stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *imageServer) stderr() string {
	b, _ := os.ReadFile(s.logs)
	return string(b)
}

// stop ends the server with SIGTERM, as a container engine does, and wants
// it gone within 20s, with exit status 0.
func (s *imageServer) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		s.t.Errorf("the server in the image did not stop within 20s of SIGTERM:\n%s", s.stderr())
		return
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		s.t.Errorf("the server in the image stopped with exit status %d, want 0:\n%s", code, s.stderr())
	}
}

// freeLoopbackAddr is a port of 127.0.0.1 free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
