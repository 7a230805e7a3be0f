package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// imageConfig is what the image's configuration says, as podman and docker
// save it.
type imageConfig struct {
	Architecture string `json:"architecture"`
	Config       struct {
		User        string
		Env         []string
		Entrypoint  []string
		Cmd         []string
		WorkingDir  string
		Volumes     map[string]struct{}
		Labels      map[string]string
		Healthcheck *struct{ Test []string }
	} `json:"config"`
}

// savedImage is an image saved with podman or docker save and unpacked:
// its configuration, its filesystem and the bytes of its layers.
type savedImage struct {
	config imageConfig
	rootfs string
	size   int64 // the layers, uncompressed
}

// saveImage saves ref with engine into a docker-archive and unpacks its
// layers into a new directory, keeping owners and modes, as a container
// engine would before it runs them.
func saveImage(t *testing.T, engine, ref string) savedImage {
	t.Helper()
	dir := t.TempDir()
	archive := filepath.Join(dir, "image.tar")
	args := []string{"save", "-o", archive, ref}
	if engine == "podman" {
		args = []string{"save", "--format", "docker-archive", "-o", archive, ref}
	}
	if out, err := exec.Command(engine, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", engine, strings.Join(args, " "), err, out)
	}
	saved := filepath.Join(dir, "saved")
	if err := untar(archive, saved, false); err != nil {
		t.Fatalf("unpack %s: %v", archive, err)
	}
	var manifest []struct {
		Config string
		Layers []string
	}
	readJSONFile(t, filepath.Join(saved, "manifest.json"), &manifest)
	if len(manifest) != 1 {
		t.Fatalf("%s saved %d images, want 1", ref, len(manifest))
	}
	img := savedImage{rootfs: filepath.Join(dir, "rootfs")}
	readJSONFile(t, filepath.Join(saved, manifest[0].Config), &img.config)
	if err := os.Mkdir(img.rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, layer := range manifest[0].Layers {
		fi, err := os.Stat(filepath.Join(saved, layer))
		if err != nil {
			t.Fatal(err)
		}
		img.size += fi.Size()
		if err := untar(filepath.Join(saved, layer), img.rootfs, true); err != nil {
			t.Fatalf("unpack layer %s: %v", layer, err)
		}
	}
	return img
}

func readJSONFile(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(name)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
}

// untar unpacks the uncompressed tar archive into dir; with owners (an
// image's layer), as the archive's owners and modes say. An image FROM
// scratch has files and directories only: anything else in a layer (a
// link, a whiteout) is an error here.
func untar(archive, dir string, owners bool) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean("/" + h.Name)
		if strings.HasPrefix(path.Base(name), ".wh.") {
			return fmt.Errorf("%s: a whiteout, which an image FROM scratch should not have", h.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		if h.Typeflag == tar.TypeSymlink && !owners {
			// The saved archive links a layer to another of the same
			// content.
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
			continue
		}
		if err := unpackEntry(tr, h, target); err != nil {
			return err
		}
		if owners {
			if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
				return err
			}
			if err := os.Chmod(target, h.FileInfo().Mode().Perm()); err != nil {
				return err
			}
		}
	}
}

func unpackEntry(tr *tar.Reader, h *tar.Header, target string) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	switch h.Typeflag {
	case tar.TypeDir:
		return os.MkdirAll(target, 0o755)
	case tar.TypeReg:
		out, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, tr)
		if closeErr := out.Close(); err == nil {
			err = closeErr
		}
		return err
	}
	return fmt.Errorf("%s: type %q, which an image FROM scratch should not have", h.Name, h.Typeflag)
}
