package rig

// Pinned versions of everything the rig installs. Bumping one of these makes
// the next run install the new version beside the old one (the install
// directories are named after the versions).
const (
	// DynamoDBLocalVersion is com.amazonaws:DynamoDBLocal on Maven Central.
	// The 2.x line is compiled for Java 17.
	DynamoDBLocalVersion = "2.6.1"

	// MavenDependencyPluginVersion resolves DynamoDB Local and its
	// dependencies (including the sqlite4java native libraries). Pinned so
	// that Maven does not look up "latest" for the plugin.
	MavenDependencyPluginVersion = "3.8.1"

	// MotoVersion is the moto release (PyPI, with the "server" extra) that
	// serves SQS. Only moto itself is pinned; pip resolves its dependencies.
	MotoVersion = "5.2.5"

	// MinJavaMajor is the oldest Java that runs DynamoDBLocalVersion.
	MinJavaMajor = 17
)

// EmulatorName is what the rig puts in SAS_EMULATOR_NAME.
const EmulatorName = "dynamodb-local+moto"
