package rig

import (
	"archive/zip"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		less bool
	}{
		{"3.9.18", "3.13.0", true},
		{"3.13", "3.13.0", true},
		{"3.13.0", "3.12.1", false},
		{"3.12", "3.13", true},
		{"3.13", "3.13", false},
	} {
		if got := versionLess(c.a, c.b); got != c.less {
			t.Errorf("versionLess(%q, %q) = %v, want %v", c.a, c.b, got, c.less)
		}
	}
}

// A long Class-Path must be folded into 72-byte lines, continuations
// starting with a space, or java refuses the manifest.
func TestWriteJarFoldsTheManifest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.jar")
	long := strings.Repeat("DynamoDBLocal_lib/some-dependency-1.2.3.jar ", 20)
	if err := writeJar(path, []manifestAttr{{"Main-Class", "M"}, {"Class-Path", long}}, map[string][]byte{"A.class": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var manifest string
	names := map[string]bool{}
	for _, f := range zr.File {
		names[f.Name] = true
		if f.Name == "META-INF/MANIFEST.MF" {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			manifest = string(b)
		}
	}
	if !names["A.class"] {
		t.Error("A.class missing")
	}
	var unfolded strings.Builder
	for _, line := range strings.Split(manifest, "\r\n") {
		if len(line) > 72 {
			t.Errorf("manifest line of %d bytes: %q", len(line), line)
		}
		if strings.HasPrefix(line, " ") {
			unfolded.WriteString(line[1:])
		} else {
			unfolded.WriteString("\n" + line)
		}
	}
	if !strings.Contains(unfolded.String(), "\nClass-Path: "+long+"\n") {
		t.Errorf("Class-Path does not unfold to the original:\n%s", manifest)
	}
}

// Without a Python new enough, the error says how to get one.
func TestLocalStackPythonNotFound(t *testing.T) {
	t.Setenv(EnvLocalStackPython, "")
	t.Setenv("PATH", t.TempDir())
	t.Setenv("PYENV_ROOT", t.TempDir())
	_, err := localStackPython(context.Background())
	if err == nil {
		t.Fatal("found a Python in an empty PATH")
	}
	for _, want := range []string{"3.13", "pyenv install", EnvLocalStackPython} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
