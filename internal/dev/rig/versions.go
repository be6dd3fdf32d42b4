package rig

// Pinned versions of everything the rig installs. Bumping one of these makes
// the next run install the new version beside the old one (the install
// directories are named after the versions).
const (
	// DynamoDBLocalVersion is com.amazonaws:DynamoDBLocal on Maven Central.
	// The 2.x line is compiled for Java 17.
	DynamoDBLocalVersion = "2.6.1"

	// ElasticMQVersion is org.elasticmq:elasticmq-server_2.13 on Maven
	// Central, the rig's default SQS emulator. Maven resolves its
	// dependencies (Scala, Pekko), pinned by its own POM.
	ElasticMQVersion = "1.7.1"

	// MavenDependencyPluginVersion resolves DynamoDB Local and ElasticMQ
	// with their dependencies (including DynamoDB Local's sqlite4java
	// native libraries). Pinned so that Maven does not look up "latest"
	// for the plugin.
	MavenDependencyPluginVersion = "3.8.1"

	// MotoVersion is the moto release (PyPI, with the "server" extra), the
	// rig's other SQS emulator (SAS_RIG_SQS=moto). Only moto itself is
	// pinned; pip resolves its dependencies.
	MotoVersion = "5.2.5"

	// MinJavaMajor is the oldest Java that runs DynamoDBLocalVersion (and
	// ElasticMQVersion, which needs 11).
	MinJavaMajor = 17
)
