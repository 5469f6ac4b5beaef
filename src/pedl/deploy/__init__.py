"""`pedl deploy aws`: a pedl cluster as one CloudFormation stack. options.py validates what was asked,
template.py builds the template (pure), master_user_data.py the master's boot script, and master_boot.py
runs on the master at boot. Nothing here calls AWS from the deploying machine."""
