package privsep

import (
	"errors"
	"os"
	"os/user"
	"strconv"
	"strings"
)

// Taken returns the test PickUID needs on this system: a uid is taken if
// any process runs under it (real, effective, saved or file-system uid,
// as /proc shows them now) or the user or group database names it
// (systemd's nss module names the dynamic users it hands out; a site
// whose directory has users in this range keeps them).
func Taken() (func(uid int) bool, error) {
	running, err := runningUIDs()
	if err != nil {
		return nil, err
	}
	return func(uid int) bool {
		if running[uid] {
			return true
		}
		id := strconv.Itoa(uid)
		var uerr user.UnknownUserIdError
		if _, err := user.LookupId(id); !errors.As(err, &uerr) {
			return true // a user, or a lookup that failed: not free
		}
		var gerr user.UnknownGroupIdError
		if _, err := user.LookupGroupId(id); !errors.As(err, &gerr) {
			return true
		}
		return false
	}, nil
}

// runningUIDs are the uids of every process in /proc.
func runningUIDs() (map[int]bool, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	uids := map[int]bool{}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // ended meanwhile
		}
		for line := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				for _, f := range strings.Fields(rest) {
					if uid, err := strconv.Atoi(f); err == nil {
						uids[uid] = true
					}
				}
				break
			}
		}
	}
	return uids, nil
}
