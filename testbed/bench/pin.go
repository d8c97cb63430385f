package bench

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Pinning keeps the collector under test and the driver (load generator and platform) off each
// other's CPU, so that a rate the collector did not hold can be told apart from a sender that ran
// out of CPU: the collector runs on CollectorCPU alone with GOMAXPROCS=1, the driver on DriverCPU.
type Pinning struct {
	// Enabled pins; the other fields say where.
	Enabled      bool
	CollectorCPU int
	DriverCPU    int
	// Tool is the taskset executable that starts the collector on its CPU.
	Tool string `json:",omitempty"`
	// Note says why pinning is off, when it was asked for and could not be done.
	Note string `json:",omitempty"`
}

// OnlineCPUs counts the machine's CPUs, whatever CPUs this process may run on (a pinned driver
// sees one in runtime.NumCPU).
func OnlineCPUs() int {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "processor" {
			n++
		}
	}
	return max(n, 1)
}

// DriverPinnedEnv marks a driver process that PinDriver has already moved to its CPU.
const DriverPinnedEnv = "SVC_BENCH_DRIVER_PINNED"

// NewPinning returns the pinning of a run on this machine: the collector on the last CPU, the
// driver on the first. It is off, with a note, on a machine with one CPU or without taskset.
func NewPinning() Pinning {
	n := OnlineCPUs()
	p := Pinning{CollectorCPU: n - 1, DriverCPU: 0}
	tool, err := exec.LookPath("taskset")
	switch {
	case n < 2:
		p.Note = "one CPU: nothing to pin apart"
	case err != nil:
		p.Note = "taskset not found (util-linux): " + err.Error()
	default:
		p.Enabled, p.Tool = true, tool
	}
	return p
}

// PinDriver re-executes the running program on the driver CPU (taskset -c N), once: the child
// sees DriverPinnedEnv and returns at once. It returns only when no re-execution took place
// (already pinned, or pinning off); Go sizes GOMAXPROCS from the CPU mask it starts with.
func PinDriver(p Pinning) error {
	if !p.Enabled || os.Getenv(DriverPinnedEnv) != "" {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("pin the driver: %w", err)
	}
	args := append([]string{p.Tool, "-c", strconv.Itoa(p.DriverCPU), self}, os.Args[1:]...)
	return syscall.Exec(p.Tool, args, append(os.Environ(), DriverPinnedEnv+"=1"))
}

// apply makes the build start on the collector CPU with GOMAXPROCS=1 (taskset execs the
// collector in its own process: the pid, /proc figures and signals stay the collector's).
func (p Pinning) apply(b Build) Build {
	if !p.Enabled || strings.HasSuffix(b.Binary, "taskset") {
		return b
	}
	b.Args = append([]string{"-c", strconv.Itoa(p.CollectorCPU), b.Binary}, b.Args...)
	b.Binary = p.Tool
	b.Env = append(append([]string{}, b.Env...), "GOMAXPROCS=1")
	return b
}

// Describe says how the run was pinned, for the report.
func (p Pinning) Describe() string {
	if !p.Enabled {
		if p.Note == "" {
			return "not pinned: collector, sender and platform share every CPU"
		}
		return "not pinned (" + p.Note + "): collector, sender and platform share every CPU"
	}
	return fmt.Sprintf("collector on CPU %d alone (`taskset -c %d`, `GOMAXPROCS=1`); sender and platform (the driver process) on CPU %d (`taskset -c %d`)",
		p.CollectorCPU, p.CollectorCPU, p.DriverCPU, p.DriverCPU)
}

// cpuMeter measures the CPU the driver and the collector used over an interval, in cores, and
// how busy each CPU was with anything (other processes on a shared machine included).
type cpuMeter struct {
	at                time.Time
	driver, collector time.Duration
	pid               int
	cpus              map[int][2]int64
}

func startMeter(collectorPID int) cpuMeter {
	m := cpuMeter{at: time.Now(), pid: collectorPID, cpus: readCPUStat()}
	if u, err := ReadUsage(os.Getpid()); err == nil {
		m.driver = u.CPU
	}
	if u, err := ReadUsage(collectorPID); err == nil {
		m.collector = u.CPU
	}
	return m
}

// cores returns the CPU each used since startMeter, in cores (CPU seconds per second).
func (m cpuMeter) cores() (driver, collector float64) {
	wall := time.Since(m.at).Seconds()
	if wall <= 0 {
		return 0, 0
	}
	if u, err := ReadUsage(os.Getpid()); err == nil {
		driver = (u.CPU - m.driver).Seconds() / wall
	}
	if u, err := ReadUsage(m.pid); err == nil {
		collector = (u.CPU - m.collector).Seconds() / wall
	}
	return driver, collector
}

// busy returns the share of the interval CPU n was busy (with any process).
func (m cpuMeter) busy(n int) float64 {
	now := readCPUStat()
	b0, b1 := m.cpus[n], now[n]
	if total := b1[1] - b0[1]; total > 0 {
		return float64(b1[0]-b0[0]) / float64(total)
	}
	return 0
}

// readCPUStat reads each CPU's busy and total jiffies from /proc/stat.
func readCPUStat() map[int][2]int64 {
	out := map[int][2]int64{}
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		n, err := strconv.Atoi(f[0][3:])
		if err != nil {
			continue
		}
		var busy, total int64
		for i, v := range f[1:] {
			x, _ := strconv.ParseInt(v, 10, 64)
			total += x
			if i != 3 && i != 4 { // idle, iowait
				busy += x
			}
		}
		out[n] = [2]int64{busy, total}
	}
	return out
}

// saturated is the CPU use, in cores, from which a pinned process counts as out of CPU.
const saturated = 0.85

// senderNeed estimates the driver's CPU at the rate asked for, from what it used for the rate
// it reached.
func senderNeed(st Step) float64 {
	if st.Accepted <= 0 {
		return st.DriverCores
	}
	return st.DriverCores * st.Rate / st.Accepted
}

// whatRanOut says which side ran out when a step failed: the collector (its one CPU busy, or
// refusing), the driver (its CPU busy), or neither (the machine's other load).
// CrowdedOut says that a failed step failed only because other processes of the shared machine
// took a pinned CPU: the collector refused, lost and dropped nothing, had less than a saturated
// core, and its CPU or the sender's was busy with other work. Such a step says nothing about the
// build; the search runs it again (Config.Repeats).
func CrowdedOut(st Step, pinned bool) bool {
	return pinned && !st.Held && st.Refused == 0 && st.Rejected+st.Failed == 0 && st.Lost == 0 &&
		st.CollectorCores < saturated && st.DriverCores < saturated &&
		(st.CollectorCPUBusy >= 0.95 || st.DriverCPUBusy >= 0.95)
}

func whatRanOut(st Step, pinned bool) string {
	switch {
	case st.Refused > 0 || st.Rejected+st.Failed > 0:
		return "collector (refused or did not answer)"
	case pinned && st.CollectorCores >= saturated && st.DriverCores < saturated:
		return fmt.Sprintf("collector CPU (%.2f cores, sender %.2f)", st.CollectorCores, st.DriverCores)
	case pinned && st.DriverCores >= saturated && st.CollectorCores < saturated:
		return fmt.Sprintf("sender CPU (%.2f cores, collector %.2f)", st.DriverCores, st.CollectorCores)
	case pinned && st.DriverCores >= saturated:
		return fmt.Sprintf("both CPUs (sender %.2f, collector %.2f cores)", st.DriverCores, st.CollectorCores)
	case pinned && st.CollectorCPUBusy >= 0.95 && senderNeed(st) < 0.25:
		return fmt.Sprintf("the collector's CPU, busy %.0f%%: the collector had %.2f cores, other processes the rest; the sender needed about %.2f cores for the rate", 100*st.CollectorCPUBusy, st.CollectorCores, senderNeed(st))
	case pinned && st.CollectorCPUBusy >= 0.95 && st.DriverCPUBusy >= 0.95:
		return fmt.Sprintf("both pinned CPUs busy (%.0f%%, %.0f%%) with other processes beside the collector (%.2f cores) and the sender (%.2f)", 100*st.CollectorCPUBusy, 100*st.DriverCPUBusy, st.CollectorCores, st.DriverCores)
	case pinned && st.CollectorCPUBusy >= 0.95:
		return fmt.Sprintf("the collector's CPU, busy %.0f%% of which the collector used %.2f cores: other processes took the rest", 100*st.CollectorCPUBusy, st.CollectorCores)
	case pinned && st.DriverCPUBusy >= 0.95:
		return fmt.Sprintf("the sender's CPU, busy %.0f%% of which the sender used %.2f cores: other processes took the rest", 100*st.DriverCPUBusy, st.DriverCores)
	case st.Lost > 0:
		return fmt.Sprintf("collector (delivery behind: collector %.2f cores, sender %.2f)", st.CollectorCores, st.DriverCores)
	default:
		return fmt.Sprintf("neither saturated (collector %.2f, sender %.2f cores): other load on the machine", st.CollectorCores, st.DriverCores)
	}
}
