package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableAPI is what CreateTables needs.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// CreateTables creates the two tables and the index, on demand, as infra/
// does, and waits until they are active. An existing table is left alone.
// For tests and the local runtime; deployments use the CDK stack.
func CreateTables(ctx context.Context, db TableAPI, cfg Config) error {
	if cfg.IndexName == "" {
		cfg.IndexName = DefaultIndexName
	}
	if cfg.OrdersIndexName == "" {
		cfg.OrdersIndexName = DefaultOrdersIndexName
	}
	str, num := types.ScalarAttributeTypeS, types.ScalarAttributeTypeN
	inputs := []*dynamodb.CreateTableInput{
		{
			TableName:   aws.String(cfg.OrdersTable),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(attrOrderID), AttributeType: str},
				{AttributeName: aws.String(attrListPK), AttributeType: str},
				{AttributeName: aws.String(attrCreatedAt), AttributeType: num},
			},
			KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(attrOrderID), KeyType: types.KeyTypeHash}},
			GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
				IndexName: aws.String(cfg.OrdersIndexName),
				KeySchema: []types.KeySchemaElement{
					{AttributeName: aws.String(attrListPK), KeyType: types.KeyTypeHash},
					{AttributeName: aws.String(attrCreatedAt), KeyType: types.KeyTypeRange},
				},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: OrdersIndexProjection},
			}},
		},
		{
			TableName:   aws.String(cfg.StateTable),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(attrOrderID), AttributeType: str},
				{AttributeName: aws.String(attrStep), AttributeType: num},
				{AttributeName: aws.String(attrIdxPK), AttributeType: str},
				{AttributeName: aws.String(attrIdxSK), AttributeType: num},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrOrderID), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrStep), KeyType: types.KeyTypeRange},
			},
			GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
				IndexName: aws.String(cfg.IndexName),
				KeySchema: []types.KeySchemaElement{
					{AttributeName: aws.String(attrIdxPK), KeyType: types.KeyTypeHash},
					{AttributeName: aws.String(attrIdxSK), KeyType: types.KeyTypeRange},
				},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: IndexProjection},
			}},
		},
	}
	for _, in := range inputs {
		_, err := db.CreateTable(ctx, in)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("creating table %s: %w", aws.ToString(in.TableName), err)
		}
		w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 100 * time.Millisecond })
		if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName}, 2*time.Minute); err != nil {
			return fmt.Errorf("waiting for table %s: %w", aws.ToString(in.TableName), err)
		}
	}
	return nil
}
