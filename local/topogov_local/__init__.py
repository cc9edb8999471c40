"""The local stack (``topogov-local``, for developers and CI), by part:

* the AWS emulator: :mod:`.aws` (the moto server and its extensions) and :mod:`.ec2_topology`
  (``DescribeInstanceTopology``), with :mod:`.eks_endpoint` (an EKS cluster endpoint that
  authenticates IAM tokens in front of the local API server);
* the cluster: :mod:`.cluster` (etcd, Kubernetes, Kueue and KWOK built from their Go modules, the
  fault proxy) and :mod:`.fleet` (the simulated GPU nodes and their EC2 instances);
* the gateway: :mod:`.apigw` (API Gateway with SigV4 and the deployed routes);
* SageMaker HyperPod task governance's add-on, emulated: :mod:`.hyperpod` (ComputeQuotas read from the
  AWS emulator, the add-on's Kueue objects kept in the API server);
* deployment and rehearsal: :mod:`.deployment` (every stack deployed by the real CDK CLI),
  :mod:`.rehearse` (a deploy rehearsed, least privilege observed), :mod:`.stack` (one local stack,
  its processes and files), :mod:`.processes` (children that end with their parent), :mod:`.guard`;
* the walkthrough (:mod:`.walkthrough`, ``topogov local``) and the benchmarks (:mod:`.bench`,
  ``topogov bench``), with their inputs (:mod:`.events`, :mod:`.traces`, :mod:`.aws_example`,
  :mod:`.lambda_context`); :mod:`.commands` adds both commands to the CLI.
"""
