package redistest

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Sentinels are redis-sentinel processes watching one primary.
type Sentinels struct {
	// MasterName is the name they know the primary by.
	MasterName string
	Servers    []*Server
}

// Addrs are the Sentinels' addresses.
func (s *Sentinels) Addrs() []string {
	var a []string
	for _, srv := range s.Servers {
		a = append(a, srv.Addr)
	}
	return a
}

// StartSentinels runs n Sentinels (quorum n/2+1) watching primary under
// masterName, with short time-outs so that a test's failover takes a
// second or two, and waits until every one of them knows the replicas
// and the other Sentinels, the state a failover needs.
func StartSentinels(t testing.TB, primary *Server, masterName string, n, replicas int) *Sentinels {
	t.Helper()
	host, port, _ := net.SplitHostPort(primary.Addr)
	ss := &Sentinels{MasterName: masterName}
	for range n {
		ss.Servers = append(ss.Servers, startWith(t, "redis-sentinel", "", func(int) []string {
			lines := []string{
				"sentinel monitor " + masterName + " " + host + " " + port + " " + strconv.Itoa(n/2+1),
				"sentinel down-after-milliseconds " + masterName + " 1000",
				"sentinel failover-timeout " + masterName + " 10000",
				"sentinel parallel-syncs " + masterName + " 1",
			}
			if primary.Password != "" {
				lines = append(lines, "sentinel auth-pass "+masterName+" "+primary.Password)
			}
			return lines
		}))
	}
	for _, s := range ss.Servers {
		WaitFor(t, 30*time.Second, s.Addr+" knows the replicas and the other sentinels", func() bool {
			return countEntries(s.CLI(t, "SENTINEL", "REPLICAS", masterName), "flags") >= replicas &&
				countEntries(s.CLI(t, "SENTINEL", "SENTINELS", masterName), "flags") >= n-1
		})
	}
	return ss
}

// countEntries counts the records of a raw SENTINEL REPLICAS/SENTINELS
// reply by one field name each has.
func countEntries(raw, field string) int {
	n := 0
	for _, line := range strings.Split(raw, "\n") {
		if line == field {
			n++
		}
	}
	return n
}

// Primary asks a Sentinel which address the primary has now.
func (s *Sentinels) Primary(t testing.TB) string {
	t.Helper()
	out := strings.Fields(s.Servers[0].CLI(t, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterName))
	if len(out) != 2 {
		t.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME: %q", out)
	}
	return net.JoinHostPort(out[0], out[1])
}

// Cluster is a Redis Cluster of primaries without replicas.
type Cluster struct {
	Nodes []*Server
}

// Addrs are the nodes' addresses.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr)
	}
	return a
}

// StartCluster runs n redis-server nodes with cluster-enabled, joins them
// with redis-cli --cluster create (the slots split evenly, no replicas),
// and waits until every node reports cluster_state:ok.
func StartCluster(t testing.TB, n int, c Config) *Cluster {
	t.Helper()
	cl := &Cluster{}
	for range n {
		bus, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		cc := c
		cc.Lines = append([]string{
			"cluster-enabled yes",
			"cluster-config-file nodes.conf",
			"cluster-node-timeout 2000",
			// The bus port defaults to port+10000, which may be taken or
			// past 65535.
			"cluster-port " + strconv.Itoa(bus),
		}, c.Lines...)
		cl.Nodes = append(cl.Nodes, Start(t, cc))
	}
	args := append([]string{"--cluster", "create"}, cl.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cmd := exec.Command("redis-cli", args...)
	if c.Password != "" {
		cmd.Env = append(cmd.Environ(), "REDISCLI_AUTH="+c.Password)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, node := range cl.Nodes {
		WaitFor(t, 30*time.Second, node.Addr+" reports cluster_state:ok", func() bool {
			return strings.Contains(node.CLI(t, "CLUSTER", "INFO"), "cluster_state:ok")
		})
	}
	return cl
}
