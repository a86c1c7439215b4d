package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// resourceMode runs one of the resource modes args names and reports
// whether it did.
func resourceMode(args []string) bool {
	switch {
	case args[0] == "ids":
		groups, err := os.Getgroups()
		if err != nil {
			fmt.Println("error:", err)
			return true
		}
		fmt.Printf("uid=%d gid=%d groups=%v\n", os.Getuid(), os.Getgid(), groups)
	case args[0] == "fill" && len(args) > 1:
		fmt.Println(fill(args[1]))
	case args[0] == "alloc":
		alloc()
	case args[0] == "sleep":
		time.Sleep(time.Minute)
	case args[0] == "fork" && len(args) > 1:
		n, err := strconv.Atoi(args[1])
		if err != nil {
			fmt.Println("error:", err)
			return true
		}
		fmt.Println(fork(n))
	case args[0] == "spin" && len(args) > 1:
		secs, err := strconv.Atoi(args[1])
		if err != nil {
			fmt.Println("error:", err)
			return true
		}
		spin(time.Duration(secs) * time.Second)
		fmt.Println("spun")
	default:
		return false
	}
	return true
}

// fill writes 1 MiB at a time into a file in dir until a write fails.
func fill(dir string) string {
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		return "error: " + err.Error()
	}
	defer func() { _ = f.Close(); _ = os.Remove(f.Name()) }()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	mib := 0
	for {
		if _, err := f.Write(chunk); err != nil {
			return fmt.Sprintf("wrote %d MiB: %v", mib, err)
		}
		mib++
		if mib > 1<<16 {
			return fmt.Sprintf("wrote %d MiB: no limit met", mib)
		}
	}
}

// alloc touches ever more memory until the kernel kills the process.
var hoard [][]byte

func alloc() {
	for i := 1; ; i++ {
		b := make([]byte, 8<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		hoard = append(hoard, b)
		if i%8 == 0 {
			fmt.Printf("holding %d MiB\n", i*8)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fork starts up to n processes that sleep, stops at the first that cannot
// start, then ends them all.
func fork(n int) string {
	self, err := os.Executable()
	if err != nil {
		return "error: " + err.Error()
	}
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	for len(cmds) < n {
		c := exec.Command(self, "sleep")
		if err := c.Start(); err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return fmt.Sprintf("started %d: %v", len(cmds), err)
		}
		cmds = append(cmds, c)
	}
	return fmt.Sprintf("started %d", len(cmds))
}

// spin keeps every CPU busy for d.
func spin(d time.Duration) {
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Go(func() {
			x := 0
			for time.Now().Before(end) {
				for i := 0; i < 1e6; i++ {
					x += i
				}
			}
			_ = x
		})
	}
	wg.Wait()
}
