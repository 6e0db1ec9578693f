"""The Spark lab: simulated DGX Sparks (containers running systemd, sshd and their
own Docker engine) joined by two CX7-like links. Two nodes by default (a head and a
worker); any number from 1 to 16, all on the same link subnets as through a switch.
See lab/README.md.

    python lab/spark_lab.py up [--nodes N]      # create, repair or resize to N; idempotent
    python lab/spark_lab.py status [--nodes N]  # per-node health, exit 1 if unhealthy
    python lab/spark_lab.py inventory [--nodes N]   # print the inventory path for N nodes
    python lab/spark_lab.py reset [--nodes N]   # nodes back to baseline, no deployment on them
    python lab/spark_lab.py down                # remove our containers, networks, volumes

N defaults to $GLM53_LAB_NODES, else 2. `up` also keeps the lab hub (lab/hub/hub.py, a
Hugging Face Hub simulator) running on the controller at http://198.18.0.1:8090, serves the
simulated TensorFold kit and profile repositories (lab/sim/) at git://198.18.0.1/ and
preloads the kit's base image glm53-lab/pytorch:26.07-py3 into every node's engine.

Everything this creates carries the label glm53-lab=1, and `down` removes only
that. Only the standard library and the docker CLI are used, so it runs before
`make setup` and on a brand-new machine (root: it apt-installs what is missing).
Importable: tests/integration/conftest.py calls up().
"""
