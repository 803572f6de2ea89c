"""The Bailian demo's submit_job.py: register the functions, upload the data and submit, in
one call. Run it with rltune serving the `dashscope…` imports (the docs' `python submit_job.py`):

    python -m rltune.reinforcement submit_job.py
"""

import asyncio

from dashscope.finetune.agentic_rl import AgenticRL


async def main():
    client = AgenticRL()
    client.init("job.yaml")
    result = await client.run()
    print("job:", result.output.job_id, result.output.status)


if __name__ == "__main__":
    asyncio.run(main())
