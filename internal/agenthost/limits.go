package agenthost

// MaxResponseBytes is how much of a success's body the deployed agent reads
// (httpcall.Config.MaxResponseBytes; ten calls run at once). A longer body
// is still a success, and a reply carries at most sqslimits.MaxResultBytes
// of a result either way. The Lambda and the local runs share it.
const MaxResponseBytes = 128 << 10
