"""The local stack's AWS: a moto server (:mod:`.server`, one process, every service) and the
project's extensions of moto, each citing the AWS behaviour it adds — CloudFormation's ordering,
updates and the resources ``cdk deploy`` of this app needs (:mod:`.cloudformation`), EKS access
entries and the cluster endpoint (:mod:`.eks`), IAM judged against the real resource with a record
of every decision (:mod:`.iam`), Lambda's account concurrency and VPC rules (:mod:`.lambdas`),
SageMaker HyperPod task governance's ComputeQuota and ClusterSchedulerConfig APIs (:mod:`.sagemaker`,
each request judged by botocore's model: :mod:`.model_rules`).
EC2's ``DescribeInstanceTopology`` is :mod:`topogov_local.ec2_topology`, installed by the server."""
