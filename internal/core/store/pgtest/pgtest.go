// Package pgtest starts a real PostgreSQL server for tests: Debian's
// package (which make test-deps installs; pgtest only finds it), initdb into a
// temp dir, the server on 127.0.0.1 with a free port, run as the postgres
// system user when the tests run as root (PostgreSQL refuses root), killed
// with the test process, removed by Stop.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is one PostgreSQL server with trust authentication for local TCP
// connections only; it holds nothing but test data.
type Server struct {
	dir  string
	bin  string
	cred *syscall.Credential
	port int
	cmd  *exec.Cmd
	done chan error
	logs *os.File
	next atomic.Int64
}

// Start installs PostgreSQL when missing, initializes a cluster in a new
// temp dir and starts the server. Its error says why the server cannot run
// here (the caller skips PostgreSQL tests with it).
func Start(ctx context.Context) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	removeStale()
	dir, err := os.MkdirTemp("", "openfief-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin, cred: cred}
	if err := s.start(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// removeStale removes the directories of servers whose test process was
// killed before Stop (the server itself died with it): no postmaster runs
// there, and the directory is older than ten minutes.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "openfief-pgtest-*"))
	for _, dir := range dirs {
		info, err := os.Stat(dir)
		if err != nil || time.Since(info.ModTime()) < 10*time.Minute {
			continue
		}
		if pidFile, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(pidFile), "\n")
			if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && syscall.Kill(pid, 0) != syscall.ESRCH {
				continue // still running
			}
		}
		_ = os.RemoveAll(dir)
	}
}

// binDir finds initdb and postgres under /usr/lib/postgresql/*/bin (the
// newest version). It installs nothing: make test-deps, which the test
// targets run first, installs Debian's postgresql package.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", errors.New("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run make test-deps, which installs Debian's postgresql")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// credential is who runs the server: the postgres system user when we are
// root (PostgreSQL refuses to run as root), else ourselves (nil).
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and there is no postgres system user to run PostgreSQL as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("postgres user: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start initializes the cluster and launches the server.
func (s *Server) start(ctx context.Context) error {
	data := filepath.Join(s.dir, "data")
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("chown the temp dir to postgres: %w", err)
		}
	}
	logs, err := os.Create(filepath.Join(s.dir, "server.log"))
	if err != nil {
		return err
	}
	s.logs = logs
	initdb := exec.CommandContext(ctx, filepath.Join(s.bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	initdb.Dir = s.dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v: %s", err, lastLines(string(out), 5))
	}
	if s.port, err = freePort(); err != nil {
		return err
	}
	return s.launch(ctx)
}

// launch runs the server on the initialized cluster and waits until it
// accepts connections.
func (s *Server) launch(ctx context.Context) error {
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"),
		"-c", "listen_addresses=127.0.0.1", "-c", "port="+strconv.Itoa(s.port),
		"-c", "unix_socket_directories="+s.dir, "-c", "max_connections=100",
		"-c", "logging_collector=off")
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	// SIGQUIT is PostgreSQL's immediate shutdown: if the test process dies,
	// the server and its backends go too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	s.cmd = cmd
	done := make(chan error, 1)
	s.done = done
	started := make(chan error, 1)
	// Pdeathsig fires when the thread that started the child exits: start
	// it from a thread that stays locked until the server is gone.
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			done <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, s.AdminDSN())
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case werr := <-done:
			done <- werr
			return fmt.Errorf("postgres exited: %v: %s", werr, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within 60s: %v: %s", err, s.logTail())
		}
	}
}

// Crash stops the server the way a crash or a power cut would: immediate
// shutdown (SIGQUIT), no checkpoint, every connection cut mid-statement.
// Restart brings it back through crash recovery.
func (s *Server) Crash() error {
	if err := s.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return err
	}
	err := <-s.done
	s.done <- err
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return err
	}
	return nil
}

// Restart starts the server again, on the same port and data, after Crash.
func (s *Server) Restart(ctx context.Context) error { return s.launch(ctx) }

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return lastLines(string(b), 10)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// AdminDSN is the DSN of the server's postgres database as its superuser.
func (s *Server) AdminDSN() string { return s.DSN("postgres") }

// DSN is the DSN of database db on the server.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// NewDatabase creates a new, empty database and returns its DSN.
func (s *Server) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("test_%d", s.next.Add(1))
	conn, err := pgx.Connect(ctx, s.AdminDSN())
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return s.DSN(name), nil
}

// TerminateBackends ends every client connection to the server but the
// one it uses, as a server restart or a network failure would: a
// transaction in flight on them is rolled back by the server.
func (s *Server) TerminateBackends(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.AdminDSN())
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }()
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'`)
	return err
}

// Stop shuts the server down (fast shutdown: open transactions roll back)
// and removes its directory.
func (s *Server) Stop() error {
	var errs []error
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT) // fast shutdown; an error means it is gone
		var exit error
		select {
		case exit = <-s.done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			exit = <-s.done
		}
		_ = exit // how a server stopped by a signal exited says nothing more
	}
	if s.logs != nil {
		errs = append(errs, s.logs.Close())
	}
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}

// PasswordRole creates a login role that must authenticate with password
// over TCP (SCRAM-SHA-256, unlike every other role here), owning a new
// database, and returns that database's DSN without the password.
func (s *Server) PasswordRole(ctx context.Context, role, password string) (string, error) {
	dsn, err := s.NewDatabase(ctx)
	if err != nil {
		return "", err
	}
	db := dsn[strings.LastIndex(dsn, "/")+1 : strings.Index(dsn, "?")]
	hba := filepath.Join(s.dir, "data", "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		return "", err
	}
	line := fmt.Sprintf("host all %s 127.0.0.1/32 scram-sha-256\n", role)
	if err := os.WriteFile(hba, append([]byte(line), old...), 0o600); err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, s.AdminDSN())
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(ctx) }()
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, strings.ReplaceAll(password, "'", "''")),
		fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", db, role),
		fmt.Sprintf("GRANT ALL ON SCHEMA public TO %s", role),
		"SELECT pg_reload_conf()",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("%s: %w", strings.Fields(q)[0], err)
		}
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", role, s.port, db), nil
}
