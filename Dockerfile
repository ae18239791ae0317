# nnue-forge in a container. Build: docker build -t nnue-forge .   (or podman build)
# Run:   docker run --gpus all -v $PWD/data:/data nnue-forge nnue train trainer=gpu data.path=/data/ds ...
# The default base is NVIDIA's CUDA runtime image (pip then takes torch's CUDA build from PyPI). Any
# Debian or Ubuntu base with apt works: --build-arg BASE=debian:bookworm for a CPU image, with the CPU
# wheel of torch: --build-arg TORCH=torch==2.13.0+cpu --build-arg PIP_ARGS="--extra-index-url
# https://download.pytorch.org/whl/cpu". scripts/container_check.sh builds it with podman from a
# debootstrapped Debian 12 base and runs it (docs/getting-started.md: containers and Apptainer).
ARG BASE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04
FROM ${BASE} AS runtime

ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev gcc git \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/nnue-forge
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# extra pip options for every install below, e.g. "--extra-index-url URL" or "--find-links DIR"
ARG PIP_ARGS=""
# torch first, pinned to the project's version; on the CUDA base pip takes the CUDA build (with its
# matching triton) from PyPI.
ARG TORCH="torch==2.13.0"
RUN pip install $PIP_ARGS "$TORCH"
# the dependencies on a layer of their own (read from pyproject.toml): a rebuild after a code change reuses it
COPY pyproject.toml ./
RUN python3 -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
      > /tmp/requirements.txt \
 && pip install $PIP_ARGS -r /tmp/requirements.txt && rm /tmp/requirements.txt
COPY nnue nnue
COPY pipeline pipeline
COPY trainer trainer
COPY kernels kernels
COPY inference inference
COPY conf conf
COPY bench bench
COPY selfplay selfplay
COPY hydra_plugins/nnue_forge_launchers hydra_plugins/nnue_forge_launchers
COPY README.md ./
RUN pip install $PIP_ARGS --no-deps . && nnue --version
COPY data/sample data/sample
COPY data/demo data/demo
COPY scripts scripts
# scripts/demo.sh runs the installed nnue instead of making .venv
ENV NNUE_USE_INSTALLED=1
CMD ["nnue", "--help"]

# The test stage (--target test): the image above plus pytest and tests/, for scripts/container_check.sh.
FROM runtime AS test
ARG PIP_ARGS=""
RUN pip install $PIP_ARGS "pytest>=8"
# the tests run against the installed package: the source tree's nnue/ (the package root only under
# pyproject's package-dir mapping) would shadow it from the working directory
RUN rm -r nnue
COPY tests tests

# The default target is the runtime image (a build without --target stops here).
FROM runtime
