package alerts

import (
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/sas"
)

// FromConfig builds the alerter a deployment uses: always the log (it
// cannot fail, so an alert reaches at least the logs when SNS and
// EventBridge are both unreachable), plus SNS when SAS_ALERT_TOPIC_ARN is
// set and EventBridge when SAS_EVENT_BUS_NAME is.
func FromConfig(awsCfg aws.Config, cfg config.Config, logger *slog.Logger) (sas.Alerter, error) {
	alerters := []sas.Alerter{NewLog(logger)}
	if cfg.AlertTopicARN != "" {
		a, err := NewSNS(sns.NewFromConfig(awsCfg), cfg.AlertTopicARN)
		if err != nil {
			return nil, fmt.Errorf("SNS alerts: %w", err)
		}
		alerters = append(alerters, a)
	}
	if cfg.EventBusName != "" {
		a, err := NewEventBridge(eventbridge.NewFromConfig(awsCfg), cfg.EventBusName)
		if err != nil {
			return nil, fmt.Errorf("EventBridge alerts: %w", err)
		}
		alerters = append(alerters, a)
	}
	return NewMulti(alerters...), nil
}
