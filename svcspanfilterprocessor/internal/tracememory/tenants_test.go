package tracememory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
)

// Two tenants' spans with the same ids (pass-through gateways: a trace crossing teams, or copied
// ids): a's chat is held; a's resend of it is refused (its write fails) and changes nothing; b's
// chat goes on as it came; a's chat goes on below a's agent. Each tenant's chat goes on once.
func TestSameIDsOfTwoTenantsEachGoOnOnce(t *testing.T) {
	d := newDriver(t, nil)
	delivered := map[string]int{} // tenant/name → times
	send := func(info client.Info, s sp) error {
		td, decisions := buildBatch([]sp{s})
		adm, err := d.m.Admit(info, td, decisions)
		if err != nil {
			return err
		}
		if adm.Pass {
			adm.Deliveries = append(adm.Deliveries, &Delivery{Info: info, Traces: td})
		}
		for _, n := range d.tenantSpans(adm.Deliveries) {
			delivered[n]++
		}
		return nil
	}
	require.NoError(t, send(tenantInfo("a"), sp{name: "chat", parent: "agent", kept: true}))
	d.journal.setFail(true)
	require.Error(t, send(tenantInfo("a"), sp{name: "chat", parent: "agent", kept: true}))
	d.journal.setFail(false)
	assert.EqualValues(t, 1, d.m.HeldSpans(), "the acknowledged copy is still held")
	require.NoError(t, send(tenantInfo("b"), sp{name: "chat", parent: "agent", kept: true}))
	require.NoError(t, send(tenantInfo("a"), sp{name: "agent", kept: true}))
	for _, n := range d.tenantSpans(d.m.TakeReady()) {
		delivered[n]++
	}
	assert.Equal(t, map[string]int{"Basic a/chat": 1, "Basic b/chat": 1, "Basic a/agent": 1}, delivered)
	assert.Zero(t, d.m.HeldSpans())
	assert.Empty(t, d.journal.spanRecords(), "every acknowledged record was delivered and removed")
}

// tenantInfo is the client context of a request of the tenant with this key (pass-through gateways).
func tenantInfo(key string) client.Info {
	return client.Info{Metadata: client.NewMetadata(map[string][]string{"authorization": {"Basic " + key}})}
}

// tenantSpans hands on deliveries and returns their spans as tenant/name, in order.
func (d *driver) tenantSpans(ds []*Delivery) []string {
	var out []string
	for _, dl := range ds {
		spans := dl.Traces.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		for i := 0; i < spans.Len(); i++ {
			out = append(out, TenantOf(dl.Info)+"/"+spans.At(i).Name())
		}
		d.m.Delivered(dl)
	}
	return out
}
