"""The Bailian demo's submit_job.py: register the functions, upload the data and submit, in
one call. rltune serves the `dashscope…` imports once its alias is installed:

    python -c "from rltune.reinforcement import install_as_dashscope; install_as_dashscope();
               import runpy; runpy.run_path('submit_job.py', run_name='__main__')"
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
