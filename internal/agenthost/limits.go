package agenthost

// MaxResponseBytes is how much of a success's body the deployed agent reads
// (httpcall.Config.MaxResponseBytes; ten calls run at once). A reply
// carries at most sas.MaxResultBytes of a result: a step whose result is
// longer fails by name, its effect undone (docs/protocol.md, "Results").
// The Lambda and the local runs share it.
const MaxResponseBytes = 128 << 10
