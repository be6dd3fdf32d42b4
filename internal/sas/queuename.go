package sas

import "strings"

// QueueName is the name of a queue given its URL (…/account/name) or ARN
// (arn:aws:sqs:region:account:name): the part every emulator and SQS agree
// on, and what matches a message's EventSourceARN to the queue it came from.
// A trailing slash is ignored; a string without either separator is taken
// as a name.
func QueueName(urlOrARN string) string {
	s := strings.TrimRight(urlOrARN, "/")
	return s[strings.LastIndexAny(s, "/:")+1:]
}

// LocalQueueARN is the ARN a local run gives the queue at queueURL (account
// 000000000000), as the EventSourceARN of the events it builds. Only the
// name is ever read back (QueueName); region is for the logs.
func LocalQueueARN(region, queueURL string) string {
	return "arn:aws:sqs:" + region + ":000000000000:" + QueueName(queueURL)
}

// QueueURLFromARN is the URL the SDK uses for the SQS queue arn
// (arn:<partition>:sqs:<region>:<account>:<name>), as the construct turns
// the allow-list's ARNs into SAS_ALLOWED_REPLY_QUEUES: a submitter may name
// its replyTo either way, and the order keeps the URL. ok is false for
// anything else.
func QueueURLFromARN(arn string) (url string, ok bool) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] != "sqs" || parts[3] == "" || parts[4] == "" || parts[5] == "" {
		return "", false
	}
	if strings.ContainsAny(parts[3]+parts[4]+parts[5], "/?#*") {
		return "", false
	}
	domain := "amazonaws.com"
	if parts[1] == "aws-cn" {
		domain = "amazonaws.com.cn"
	}
	return "https://sqs." + parts[3] + "." + domain + "/" + parts[4] + "/" + parts[5], true
}
