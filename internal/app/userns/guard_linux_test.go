package userns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// guardProbeEnv makes the test binary print checkChild's verdict.
const guardProbeEnv = "FIPS_GO_TEST_GUARD_PROBE"

// TestMain lets TestChildMainRefusesInitialNamespace run this test binary
// as a would-be namespace child.
func TestMain(m *testing.M) {
	if os.Getenv(guardProbeEnv) != "" {
		if err := checkChild(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("ok")
		os.Exit(0)
	}
	if os.Getenv(ChildEnv) != "" {
		ChildMain()
	}
	os.Exit(m.Run())
}

// TestChildMainRefusesInitialNamespace plays the local attacker: it sets
// ChildEnv and hands over a control socket without creating a user
// namespace. The child must not read its spec, answer or make a TUN.
func TestChildMainRefusesInitialNamespace(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours := os.NewFile(uintptr(fds[0]), "ours")
	defer ours.Close()
	theirs := os.NewFile(uintptr(fds[1]), "theirs")
	// A spec that is not JSON: a child that acts on it answers "bad spec"
	// and creates nothing, so the test is harmless even before the fix.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ChildEnv+"=not json")
	cmd.ExtraFiles = []*os.File{theirs}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	ours.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 4096)
	n, rerr := ours.Read(buf)
	cmd.Wait()
	if n > 0 {
		t.Fatalf("the child answered from the initial user namespace: %q", buf[:n])
	}
	if rerr != nil && errors.Is(rerr, os.ErrDeadlineExceeded) {
		t.Fatal("the child neither answered nor exited")
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("the child exited %v; want a refusal (stderr %q)", cmd.ProcessState, stderr.String())
	}
}

// TestCheckChildInNamespace is the other side: in a namespace made the way
// Start makes it, the guard lets the child act; in this one (the initial
// namespace, or a container's) it does not.
func TestCheckChildInNamespace(t *testing.T) {
	if err := checkChild(); err == nil {
		t.Error("checkChild passed outside the namespace child's namespace")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), guardProbeEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil && len(out) == 0 {
		t.Skipf("no user namespace here: %v", err)
	}
	if string(out) != "ok\n" {
		t.Fatalf("in a new one-uid user namespace checkChild said %q (%v)", out, err)
	}
}
